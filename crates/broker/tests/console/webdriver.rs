//! A small WebDriver client (the W3C protocol over HTTP) driving headless Chromium
//! through Debian's `chromedriver`: sessions, navigation, elements, scripts and
//! screenshots, and nothing more than the console tests use.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

/// The key under which WebDriver names an element.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long a script that waits for the page may run: a guard against a console that
/// never shows what the test waits for, not a timing assertion.
const PATIENCE_MS: u64 = 20_000;

/// The browser binaries, or why they are missing.
pub(crate) fn binaries() -> Result<(String, String), String> {
    let find = |names: &[&str]| {
        names.iter().find_map(|n| {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|d| d.join(n))
                .find(|p| p.is_file())
                .map(|p| p.display().to_string())
        })
    };
    let browser = std::env::var("MQLITE_CHROMIUM")
        .ok()
        .or_else(|| find(&["chromium", "chromium-browser", "google-chrome"]));
    let driver = std::env::var("MQLITE_CHROMEDRIVER")
        .ok()
        .or_else(|| find(&["chromedriver"]));
    match (browser, driver) {
        (Some(b), Some(d)) => Ok((b, d)),
        _ => Err(
            "headless Chromium is not installed: `apt-get install chromium \
                  chromium-driver` (.ci/run does this)"
                .into(),
        ),
    }
}

/// A running chromedriver; killed on drop.
pub(crate) struct Driver {
    child: Child,
    endpoint: String,
    browser: String,
}

impl Driver {
    /// Starts chromedriver on a free loopback port and waits for its ready line.
    pub(crate) fn start(browser: &str, driver: &str) -> Result<Driver, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let mut child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {driver}: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        // chromedriver prints a line saying it started (or why not) before it serves.
        let ready = lines
            .by_ref()
            .take(20)
            .map_while(Result::ok)
            .any(|l| l.contains("started successfully"));
        if !ready {
            let _ = child.kill();
            return Err(format!("{driver} did not start on port {port}"));
        }
        std::thread::spawn(move || lines.for_each(drop));
        Ok(Driver {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            browser: browser.to_owned(),
        })
    }

    /// A new headless browser session with a 1280x800 window.
    pub(crate) async fn session(&self) -> Result<Session, String> {
        let http = reqwest::Client::builder()
            .timeout(HTTP_PATIENCE)
            .build()
            .map_err(|e| format!("http client: {e}"))?;
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": self.browser,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,800",
                         "--hide-scrollbars", "--force-device-scale-factor=1"]
            }
        }}});
        let mut s = Session {
            http,
            base: String::new(),
        };
        let created = s
            .call(
                reqwest::Method::POST,
                &format!("{}/session", self.endpoint),
                Some(caps),
            )
            .await?;
        let id = created["sessionId"]
            .as_str()
            .ok_or_else(|| format!("no session id in {created}"))?;
        s.base = format!("{}/session/{id}", self.endpoint);
        s.post("/timeouts", json!({"script": PATIENCE_MS})).await?;
        Ok(s)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One browser session.
pub(crate) struct Session {
    http: reqwest::Client,
    base: String,
}

/// An element of the page.
#[derive(Clone)]
pub(crate) struct Element(String);

impl Session {
    async fn call(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        let mut req = self.http.request(method, url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.map_err(|e| format!("{url}: {e}"))?;
        let status = res.status();
        let v: Value = res.json().await.map_err(|e| format!("{url}: {e}"))?;
        if !status.is_success() {
            return Err(format!("{url}: {status}: {}", v["value"]["message"]));
        }
        Ok(v.get("value").cloned().unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value, String> {
        self.call(
            reqwest::Method::POST,
            &format!("{}{path}", self.base),
            Some(body),
        )
        .await
    }

    async fn get(&self, path: &str) -> Result<Value, String> {
        self.call(reqwest::Method::GET, &format!("{}{path}", self.base), None)
            .await
    }

    /// Opens `url`.
    pub(crate) async fn goto(&self, url: &str) -> Result<(), String> {
        self.post("/url", json!({ "url": url })).await.map(drop)
    }

    /// The first element `css` matches, once the page shows one.
    pub(crate) async fn find(&self, css: &str) -> Result<Element, String> {
        self.wait_for(css).await?;
        let v = self
            .post("/element", json!({"using": "css selector", "value": css}))
            .await?;
        v[ELEMENT]
            .as_str()
            .map(|id| Element(id.to_owned()))
            .ok_or_else(|| format!("{css}: no element in {v}"))
    }

    /// Clicks what `css` matches.
    pub(crate) async fn click(&self, css: &str) -> Result<(), String> {
        let e = self.find(css).await?;
        self.post(&format!("/element/{}/click", e.0), json!({}))
            .await
            .map(drop)
    }

    /// Types `text` into what `css` matches.
    pub(crate) async fn type_into(&self, css: &str, text: &str) -> Result<(), String> {
        let e = self.find(css).await?;
        self.post(&format!("/element/{}/value", e.0), json!({ "text": text }))
            .await
            .map(drop)
    }

    /// The text content of what `css` matches.
    pub(crate) async fn text(&self, css: &str) -> Result<String, String> {
        self.wait_for(css).await?;
        let v = self
            .script(
                "return document.querySelector(arguments[0]).textContent",
                json!([css]),
            )
            .await?;
        Ok(v.as_str().unwrap_or_default().to_owned())
    }

    /// Runs `body` (a function body taking `arguments`) in the page.
    pub(crate) async fn script(&self, body: &str, args: Value) -> Result<Value, String> {
        self.post("/execute/sync", json!({"script": body, "args": args}))
            .await
    }

    /// Runs `body` in the page; it calls its last argument with the result.
    pub(crate) async fn script_async(&self, body: &str, args: Value) -> Result<Value, String> {
        self.post("/execute/async", json!({"script": body, "args": args}))
            .await
    }

    /// Waits in the page, watching the DOM, until `css` matches; its text equals `text`
    /// when given. The page's own refresh drives the change; nothing here sleeps.
    pub(crate) async fn wait_until(&self, css: &str, text: Option<&str>) -> Result<(), String> {
        const WATCH: &str = r#"
            const [css, want, done] = arguments;
            const ok = () => {
                const e = document.querySelector(css);
                return e !== null && (want === null || e.textContent.trim() === want);
            };
            if (ok()) { done(true); return; }
            const o = new MutationObserver(() => { if (ok()) { o.disconnect(); done(true); } });
            o.observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
        "#;
        self.script_async(WATCH, json!([css, text]))
            .await
            .map(drop)
            .map_err(|e| {
                format!(
                    "the page never showed {css}{}: {e}",
                    text.map(|t| format!(" with text {t:?}"))
                        .unwrap_or_default()
                )
            })
    }

    /// Waits until nothing matches `css`.
    pub(crate) async fn wait_gone(&self, css: &str) -> Result<(), String> {
        const WATCH: &str = r#"
            const [css, done] = arguments;
            const ok = () => document.querySelector(css) === null;
            if (ok()) { done(true); return; }
            const o = new MutationObserver(() => { if (ok()) { o.disconnect(); done(true); } });
            o.observe(document, {subtree: true, childList: true, attributes: true});
        "#;
        self.script_async(WATCH, json!([css]))
            .await
            .map(drop)
            .map_err(|e| format!("{css} never left the page: {e}"))
    }

    async fn wait_for(&self, css: &str) -> Result<(), String> {
        self.wait_until(css, None).await
    }

    /// Whether anything matches `css` now.
    pub(crate) async fn exists(&self, css: &str) -> Result<bool, String> {
        let v = self
            .script(
                "return document.querySelector(arguments[0]) !== null",
                json!([css]),
            )
            .await?;
        Ok(v.as_bool().unwrap_or(false))
    }

    /// A PNG of the window.
    pub(crate) async fn screenshot(&self) -> Result<Vec<u8>, String> {
        let v = self.get("/screenshot").await?;
        STANDARD
            .decode(v.as_str().unwrap_or_default())
            .map_err(|e| format!("screenshot: {e}"))
    }

    /// Ends the session (the browser exits).
    pub(crate) async fn close(self) {
        let _ = self.call(reqwest::Method::DELETE, &self.base, None).await;
    }
}

/// How long a test waits for chromedriver's HTTP answers before failing.
pub(crate) const HTTP_PATIENCE: Duration = Duration::from_secs(60);
