//! The web console in a real browser: headless Chromium driven over WebDriver logs in
//! with a token, watches counts change, peeks, redrives and purges, and shows that a
//! listen-only key gets no purge button and a 403 when it tries, and that a `<script>`
//! body is shown as text. Without Chromium the trials are reported skipped with the
//! reason (with `CI=true` they fail instead). The run leaves screenshots under
//! `target/tmp/console/`; `MQLITE_UPDATE_SCREENSHOTS=1` also writes them into
//! `docs/console/`.

#[path = "../common/mod.rs"]
mod common;
mod webdriver;

use std::path::PathBuf;

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use serde_json::json;

use common::*;
use mqlite_broker::wire::*;
use mqlite_broker::{AuthConfig, Rpc};
use webdriver::{Driver, Session};

type Outcome = Result<(), String>;

fn main() {
    let args = Arguments::from_args();
    let trials = vec![
        browser_trial(
            "console::operator_watches_peeks_redrives_and_purges",
            operator,
        ),
        browser_trial("console::listen_only_key_gets_no_purge", listen_only),
        browser_trial("console::topics_filters_and_keys", topics_and_keys),
        browser_trial("console::schedules_created_listed_deleted", schedules),
    ];
    libtest_mimic::run(&args, trials).exit();
}

type Flow = fn(World, Session) -> std::pin::Pin<Box<dyn std::future::Future<Output = Outcome>>>;

fn browser_trial(name: &'static str, flow: Flow) -> Trial {
    Trial::ignorable_test(name, move || {
        let (browser, driver) = match webdriver::binaries() {
            Ok(b) => b,
            Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
                return Err(Failed::from(format!("CI=true and {why}")));
            }
            Err(why) => return Ok(Completion::ignored_with(format!("skipped: {why}"))),
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Failed::from(format!("runtime: {e}")))?;
        rt.block_on(async {
            let driver = Driver::start(&browser, &driver)?;
            let w = world_with(AuthConfig::Tokens(vec![ADMIN.to_owned()]), |c| c.ui = true).await;
            let session = driver.session().await?;
            flow(w, session).await
        })
        .map_err(Failed::from)?;
        Ok(Completion::Completed)
    })
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Outcome {
    if ok { Ok(()) } else { Err(what()) }
}

fn base(w: &World) -> String {
    format!("http://{}", w.broker.addr())
}

/// Writes a screenshot where the run keeps them (and into docs/ when asked).
async fn shoot(s: &Session, name: &str) -> Outcome {
    let png = s.screenshot().await?;
    let mut dirs = vec![PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console")];
    if std::env::var("MQLITE_UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1") {
        dirs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/console"));
    }
    for dir in dirs {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(name);
        std::fs::write(&path, &png).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

async fn login(s: &Session, w: &World, token: &str) -> Outcome {
    s.goto(&format!("{}/ui", base(w))).await?;
    s.type_into("#token", token).await?;
    s.click("#login").await?;
    s.wait_until("#whoami", None).await
}

/// Dead-letters the `n` oldest messages of `queue` with this reason.
async fn dead_letter(w: &World, queue: &str, n: i64, reason: &str) -> Vec<i64> {
    let got = w.receive(queue, n).await;
    for m in &got {
        w.settle(Rpc::Reject, queue, m, |r| {
            r.dead_letter_reason = reason.into();
            r.dead_letter_description = "card expired".into();
        })
        .await
        .expect("Reject");
    }
    got.iter().map(|m| m.seq_number).collect()
}

const XSS: &str = "<script>window.__xss = 1</script><img src=x onerror=\"window.__xss = 2\">";

fn operator(w: World, s: Session) -> std::pin::Pin<Box<dyn std::future::Future<Output = Outcome>>> {
    Box::pin(async move {
        let cfg = WireQueueConfig {
            max_delivery_count: Some(1),
            ..Default::default()
        };
        w.create_queue("orders", cfg.clone()).await;
        w.create_queue("payments", cfg).await;
        login(&s, &w, ADMIN).await?;
        let row = |q: &str, state: &str| format!("#queues tr[data-queue=\"{q}\"] .count-{state}");
        s.wait_until(&row("orders", "active"), Some("0")).await?;

        // Counts change on their own after sends: the page is not reloaded.
        s.script("window.__loaded = true", json!([])).await?;
        let plain = w.send("orders", &["a", "b", "c"]).await;
        let shaped = w
            .send("orders", &[r#"{"order":7,"total":12.5}"#, XSS])
            .await;
        w.send("payments", &["p"]).await;
        s.wait_until(&row("orders", "active"), Some("5")).await?;
        let dead = dead_letter(&w, "orders", 2, "PaymentDeclined").await;
        check(dead == plain[..2], || format!("dead-lettered {dead:?}"))?;
        s.wait_until(&row("orders", "dead_lettered"), Some("2"))
            .await?;
        s.wait_until(&row("orders", "active"), Some("3")).await?;
        let same_page = s
            .script("return window.__loaded === true", json!([]))
            .await?;
        check(same_page == json!(true), || "the page reloaded".into())?;
        shoot(&s, "queues.png").await?;

        // One queue: peek every state; bodies are text, JSON pretty-printed.
        s.click("#queues tr[data-queue=\"orders\"] .name a").await?;
        s.wait_until("#queue-name", Some("orders")).await?;
        s.click("#peek").await?;
        let body = |seq: i64| format!("#peek-results .message[data-seq=\"{seq}\"] pre.body");
        s.wait_until(&body(shaped[1]), Some(XSS)).await?;
        let json_text = s.text(&body(shaped[0])).await?;
        check(json_text.contains("\n  \"order\": 7"), || {
            format!("JSON body not pretty-printed: {json_text:?}")
        })?;
        let ran = s
            .script(
                "return [window.__xss === undefined, \
                 document.querySelectorAll('#peek-results script, #peek-results img').length]",
                json!([]),
            )
            .await?;
        check(ran == json!([true, 0]), || {
            format!("the <script> body became markup: {ran}")
        })?;

        // Dead letters with reason and description; redrive one selected.
        let dl = |seq: i64| format!("#dead-letters tr[data-seq=\"{seq}\"]");
        s.wait_until(
            &format!("{} td.reason", dl(dead[0])),
            Some("PaymentDeclined"),
        )
        .await?;
        s.wait_until(
            &format!("{} td.description", dl(dead[0])),
            Some("card expired"),
        )
        .await?;
        shoot(&s, "dead-letters.png").await?;
        s.click(&format!("{} input.pick", dl(dead[0]))).await?;
        s.click("#redrive-selected").await?;
        s.wait_gone(&dl(dead[0])).await?;
        check(s.exists(&dl(dead[1])).await?, || {
            "the unselected dead letter left too".into()
        })?;
        let st = w.stats("orders").await;
        check((st.dead_lettered, st.active) == (1, 4), || {
            format!("after redrive: {st:?}")
        })?;
        s.wait_until("#queue-counts .count-dead_lettered", Some("1"))
            .await?;

        // Purge asks first, then deletes the rest.
        s.click("#purge").await?;
        s.click("#confirm-yes").await?;
        s.wait_gone(&dl(dead[1])).await?;
        check(w.stats("orders").await.dead_lettered == 0, || {
            "purge left dead letters".into()
        })?;

        // Pause the queue's sends from its page, then resume it (promise 19).
        let status = async |want: &str| -> Outcome {
            s.script(
                "const sel = document.getElementById('status-select'); sel.value = arguments[0];",
                json!([want]),
            )
            .await?;
            s.click("#status-set").await?;
            s.wait_until(
                "#notice",
                Some(&format!("orders: {}", want.replace('_', " "))),
            )
            .await?;
            let listed: QueuesResponse = w
                .client
                .call(Rpc::ListQueues, &Empty {})
                .await
                .map_err(|e| e.to_string())?;
            let now = listed
                .queues
                .iter()
                .find(|q| q.name == "orders")
                .map(|q| q.status.clone());
            let shown = if want == "active" { "" } else { want };
            check(now.as_deref() == Some(shown), || {
                format!("status {now:?} after {want}")
            })
        };
        status("send_disabled").await?;
        status("active").await?;

        // A test message from the console.
        s.type_into("#send-body", "hello from the console").await?;
        s.click("#send").await?;
        s.wait_until("#queue-counts .count-active", Some("5"))
            .await?;
        s.close().await;
        Ok(())
    })
}

fn listen_only(
    w: World,
    s: Session,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Outcome>>> {
    Box::pin(async move {
        let cfg = WireQueueConfig {
            max_delivery_count: Some(1),
            ..Default::default()
        };
        w.create_queue("orders", cfg).await;
        w.send("orders", &["x", "y"]).await;
        let dead = dead_letter(&w, "orders", 1, "Broken").await;
        let key = w.create_key("watcher", &["listen"]).await;
        login(&s, &w, &key.token).await?;
        // Not allowed to list queues: the page says so and offers to open one by name.
        s.type_into("#open-queue", "orders").await?;
        s.click("#open-queue-go").await?;
        s.wait_until("#queue-counts .count-dead_lettered", Some("1"))
            .await?;
        s.wait_until(&format!("#dead-letters tr[data-seq=\"{}\"]", dead[0]), None)
            .await?;
        for admin_only in [
            "#purge",
            "#redrive-all",
            "#redrive-selected",
            "#nav-keys",
            "#status-set",
        ] {
            let shown = s
                .script(
                    "const e = document.querySelector(arguments[0]); \
                     return e !== null && e.offsetParent !== null",
                    json!([admin_only]),
                )
                .await?;
            check(shown == json!(false), || {
                format!("{admin_only} is shown to a listen-only key")
            })?;
        }
        // Trying anyway, with the page's own token, is refused by the broker.
        let status = s
            .script_async(
                "const done = arguments[0]; \
                 fetch('/mqlite.v1.AdminService/Purge', {method: 'POST', \
                   headers: {'Content-Type': 'application/json', \
                     'Authorization': 'Bearer ' + sessionStorage.getItem('mqlite.token')}, \
                   body: JSON.stringify({queue: 'orders'})}).then(r => done(r.status))",
                json!([]),
            )
            .await?;
        check(status == json!(403), || format!("Purge answered {status}"))?;
        check(w.stats("orders").await.dead_lettered == 1, || {
            "the refused purge deleted something".into()
        })?;
        // The token lives in session storage only: not in the URL, not in local storage.
        let leak = s
            .script(
                "return [location.href.includes(arguments[0]), localStorage.length]",
                json!([key.token]),
            )
            .await?;
        check(leak == json!([false, 0]), || {
            format!("token kept elsewhere: {leak}")
        })?;
        s.close().await;
        Ok(())
    })
}

fn topics_and_keys(
    w: World,
    s: Session,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Outcome>>> {
    Box::pin(async move {
        w.create_topic("events").await;
        w.subscribe("events", "big", "(body_json.amount ?? 0) > 100")
            .await
            .map_err(|e| format!("Subscribe: {e}"))?;
        w.send("events", &[r#"{"amount":500}"#, r#"{"amount":5}"#])
            .await;
        login(&s, &w, ADMIN).await?;

        // The subscription with its filter and counts; its filter into the tester.
        s.click("#nav-topics").await?;
        let sub = "#subscriptions tr[data-subscription=\"big\"]";
        s.wait_until(&format!("{sub} .count-active"), Some("1"))
            .await?;
        s.click(&format!("{sub} button.test")).await?;
        s.type_into("#filter-body", r#"{"amount": 150}"#).await?;
        s.click("#filter-test").await?;
        s.wait_until("#filter-result", Some("valid, matched"))
            .await?;
        s.script(
            "document.querySelector('#filter-body').value = '{\"amount\": 7}'",
            json!([]),
        )
        .await?;
        s.click("#filter-test").await?;
        s.wait_until("#filter-result", Some("valid, not matched"))
            .await?;
        s.script(
            "document.querySelector('#filter-expr').value = 'body_json.amount >'",
            json!([]),
        )
        .await?;
        s.click("#filter-test").await?;
        s.wait_until("#filter-result.bad", None).await?;

        // A key: created with its token shown once, which works; then revoked.
        s.click("#nav-keys").await?;
        s.type_into("#key-name", "billing").await?;
        s.click("#perm-send").await?;
        s.click("#key-create").await?;
        s.wait_until("#new-token code", None).await?;
        let token = s.text("#new-token code").await?;
        let as_key = w.client.with_token(Some(token.clone()));
        let me: WhoAmIResponse = as_key
            .call(Rpc::WhoAmI, &Empty {})
            .await
            .map_err(|e| format!("the shown token does not work: {e}"))?;
        check(me.name == "billing" && me.permissions == ["send"], || {
            format!("{me:?}")
        })?;
        let row = format!("#keys tr[data-key=\"{}\"]", me.id);
        s.click(&format!("{row} button.revoke")).await?;
        s.wait_until(&format!("{row} td.status"), Some("revoked"))
            .await?;
        check(
            as_key
                .call::<_, WhoAmIResponse>(Rpc::WhoAmI, &Empty {})
                .await
                .is_err(),
            || "a revoked key still works".into(),
        )?;
        // Leaving the page drops the token from it.
        s.click("#nav-queues").await?;
        s.click("#nav-keys").await?;
        s.wait_until("#keys", None).await?;
        let shown = s
            .script(
                "return document.body.textContent.includes(arguments[0])",
                json!([token]),
            )
            .await?;
        check(shown == json!(false), || "the token is shown again".into())?;
        s.close().await;
        Ok(())
    })
}

/// The schedules page (promise 21): an operator creates a cron schedule in a time zone
/// and an interval one from the form, sees them listed with their next tick, sees a
/// bad zone refused with the reason, and deletes one.
fn schedules(
    w: World,
    s: Session,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Outcome>>> {
    Box::pin(async move {
        w.create_queue("reports", WireQueueConfig::default()).await;
        login(&s, &w, ADMIN).await?;
        s.click("#nav-schedules").await?;
        s.wait_until("#schedules", None).await?;
        s.type_into("#sch-name", "nightly").await?;
        s.type_into("#sch-queue", "reports").await?;
        s.type_into("#sch-when", "30 9 * * *").await?;
        s.type_into("#sch-tz", "Asia/Kolkata").await?;
        s.type_into("#sch-body", "daily report").await?;
        s.click("#sch-create").await?;
        let row = "#schedules tr[data-schedule=\"nightly\"]";
        // 09:30 in Kolkata after 2023-11-14T22:13:20Z is 04:00Z the next day.
        s.wait_until(&format!("{row} td.next"), Some("2023-11-15T04:00:00.000Z"))
            .await?;
        s.wait_until(&format!("{row} td.when"), Some("30 9 * * * (Asia/Kolkata)"))
            .await?;

        // An interval schedule, skipping missed windows.
        reset_schedule_form(&s, "every", "skip").await?;
        s.type_into("#sch-name", "pulse").await?;
        s.type_into("#sch-when", "300").await?;
        s.click("#sch-create").await?;
        let pulse = "#schedules tr[data-schedule=\"pulse\"]";
        s.wait_until(&format!("{pulse} td.when"), Some("every 300 s"))
            .await?;
        s.wait_until(&format!("{pulse} td.missed"), Some("skip"))
            .await?;
        let listed: SchedulesResponse = w
            .client
            .call(Rpc::ListSchedules, &Empty {})
            .await
            .map_err(|e| format!("ListSchedules: {e}"))?;
        let pulse_schedule = listed.schedules.iter().find(|x| x.name == "pulse");
        check(
            pulse_schedule.is_some_and(|x| x.every_ms == 300_000 && x.queue == "reports"),
            || format!("{listed:?}"),
        )?;

        // A bad zone is refused with the reason, and nothing is stored.
        reset_schedule_form(&s, "cron", "skip").await?;
        s.type_into("#sch-name", "lost").await?;
        s.type_into("#sch-when", "0 2 * * *").await?;
        s.type_into("#sch-tz", "Mars/Olympus").await?;
        s.click("#sch-create").await?;
        s.wait_until("#error:not([hidden])", None).await?;
        let error = s.text("#error").await?;
        check(error.contains("IANA"), || format!("error shown: {error}"))?;
        shoot(&s, "schedules.png").await?;

        s.click(&format!("{pulse} button.delete")).await?;
        s.wait_until("#notice", Some("deleted schedule pulse"))
            .await?;
        let listed: SchedulesResponse = w
            .client
            .call(Rpc::ListSchedules, &Empty {})
            .await
            .map_err(|e| format!("ListSchedules: {e}"))?;
        let names: Vec<_> = listed.schedules.iter().map(|x| x.name.as_str()).collect();
        check(names == ["nightly"], || format!("{names:?}"))?;
        s.close().await;
        Ok(())
    })
}

/// Empties the schedule form and picks its recurrence kind and missed policy.
async fn reset_schedule_form(s: &Session, kind: &str, missed: &str) -> Outcome {
    s.script(
        "const [kind, missed] = arguments; \
         const k = document.querySelector('#sch-kind'); \
         k.value = kind; k.dispatchEvent(new Event('change')); \
         document.querySelector('#sch-missed').value = missed; \
         for (const id of ['#sch-name', '#sch-when', '#sch-tz']) document.querySelector(id).value = '';",
        json!([kind, missed]),
    )
    .await
    .map(drop)
}
