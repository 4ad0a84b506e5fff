//! Group commit over the network (promise 14.6 on the libSQL store): operations that
//! wait for the owner's stream share one transaction, and those of one statement share
//! one request. Each trial holds the stream with an application transaction, queues
//! calls behind it, and lets them go at once, so the group is exactly those calls.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use libtest_mimic::Arguments;

use mqlite_contract::{
    Error, LockRef, LockToken, ManualClock, MessageState, OutMessage, PeekOptions, QueueConfig,
    ReceiveOptions, SendOptions, SeqNumber, SystemClock,
};
use mqlite_engine::Engine;
use mqlite_store_libsql::LibsqlStore;
use mqlite_testbed::libsql::Sqld;
use support::{Outcome, trial, trial_with_blocking_threads};

fn main() {
    let args = Arguments::from_args();
    let trials = vec![
        trial(
            "group_commit::calls_waiting_for_the_stream_share_one_request",
            |d| Box::pin(calls_waiting_for_the_stream_share_one_request(d)),
        ),
        // One blocking thread for the application's transaction that holds the stream,
        // one for the leader.
        trial_with_blocking_threads(
            "group_commit::callers_waiting_for_the_stream_hold_no_thread",
            2,
            |d| Box::pin(callers_waiting_for_the_stream_hold_no_thread(d)),
        ),
        trial(
            "group_commit::the_stores_close_finishes_every_queued_call_first",
            |d| Box::pin(the_stores_close_finishes_every_queued_call_first(d)),
        ),
        trial(
            "group_commit::a_groups_sends_to_one_queue_are_one_insert_numbered_in_order",
            |d| Box::pin(a_groups_sends_to_one_queue_are_one_insert_numbered_in_order(d)),
        ),
        trial(
            "group_commit::a_refused_statement_fails_alone_and_its_neighbours_commit",
            |d| Box::pin(a_refused_statement_fails_alone_and_its_neighbours_commit(d)),
        ),
        trial(
            "group_commit::a_lost_request_fails_every_call_it_held",
            |d| Box::pin(a_lost_request_fails_every_call_it_held(d)),
        ),
        trial(
            "group_commit::a_deposed_owners_shared_request_fails_every_call_it_held",
            |d| Box::pin(a_deposed_owners_shared_request_fails_every_call_it_held(d)),
        ),
        trial(
            "group_commit::concurrent_sends_after_a_send_go_at_the_number_known_and_never_repeat_one",
            |d| {
                Box::pin(
                    concurrent_sends_after_a_send_go_at_the_number_known_and_never_repeat_one(d),
                )
            },
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
}

const Q: &str = "q";

type Mq = Engine<LibsqlStore>;
type Call = tokio::task::JoinHandle<Result<&'static str, Error>>;

async fn engine(server: &Sqld) -> Result<Mq, Error> {
    let mq = support::engine(server.url(), SystemClock::shared(), Duration::from_secs(60)).await?;
    mq.create_queue(Q, QueueConfig::default()).await?;
    // The queue's row is known from here on: a send of one is one statement.
    mq.send(Q, OutMessage::new("first")).await?;
    Ok(mq)
}

/// An application transaction that holds the owner's stream until `release` is sent.
async fn hold(
    mq: &Mq,
) -> Result<
    (
        std::sync::mpsc::Sender<()>,
        tokio::task::JoinHandle<Result<(), Error>>,
    ),
    Box<dyn std::error::Error>,
> {
    let (inside_tx, inside) = tokio::sync::oneshot::channel::<()>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let mq = mq.clone();
    let held = tokio::spawn(async move {
        mq.tx(async move |_tx| {
            let _ = inside_tx.send(());
            // The body runs off the executor: a blocking wait is its own business.
            let _ = released.recv();
            Ok::<_, Error>(())
        })
        .await
    });
    inside.await?;
    Ok((release, held))
}

/// Every message of `queue` (the trials hold fewer than 100).
async fn stored(mq: &Mq, queue: &str) -> Result<Vec<mqlite_contract::Message>, Error> {
    mq.peek(
        queue,
        PeekOptions {
            max: 100,
            ..Default::default()
        },
    )
    .await
}

/// The bodies of the messages [`stored`] finds in `queue`.
async fn stored_bodies(mq: &Mq, queue: &str) -> Result<Vec<Vec<u8>>, Error> {
    Ok(stored(mq, queue)
        .await?
        .into_iter()
        .map(|m| m.content.body)
        .collect())
}

/// A send to `Q` of each body, each its own task, answering "sent".
fn sends(mq: &Mq, bodies: impl IntoIterator<Item = String>) -> Vec<Call> {
    bodies
        .into_iter()
        .map(|body| {
            let mq = mq.clone();
            tokio::spawn(async move { mq.send(Q, OutMessage::new(body)).await.map(|_| "sent") })
        })
        .collect()
}

/// Waits until `n` operations are queued behind the held stream.
async fn queued(mq: &Mq, n: usize) {
    while mq.store().waiting() < n {
        tokio::task::yield_now().await;
    }
}

/// Sixteen concurrent sends, a receive, a forged completion and a send to a missing
/// queue, queued together: the sends and the receive go out in ONE request; the two
/// calls whose flows are more than one statement (or fail before sending) run alone
/// after it. Every send is acknowledged with its own number and stored once.
async fn calls_waiting_for_the_stream_share_one_request(dir: tempfile::TempDir) -> Outcome {
    let server = Sqld::start(&dir.path().join("sqld"))?;
    let mq = engine(&server).await?;
    // What holding the stream costs alone, to tell the group's requests apart.
    let before = mq.store().statements_sent();
    let (release, held) = hold(&mq).await?;
    release.send(())?;
    held.await??;
    let hold_cost = mq.store().statements_sent() - before;

    let before = (mq.store().statements_sent(), mq.store().shared_requests());
    let (release, held) = hold(&mq).await?;
    let mut calls = sends(&mq, (0..16).map(|i| format!("m{i}")));
    queued(&mq, 16).await;
    {
        let mq = mq.clone();
        calls.push(tokio::spawn(async move {
            match mq.receive_one(Q).await? {
                Some(m) => {
                    if m.content.body != b"first" {
                        return Err(Error::invalid("the receive took a message of its group"));
                    }
                    Ok("received")
                }
                None => Ok("nothing received"),
            }
        }));
    }
    queued(&mq, 17).await;
    release.send(())?;
    held.await??;
    let mut seqs = BTreeSet::new();
    let mut answers = Vec::new();
    for call in calls {
        answers.push(call.await??);
    }
    let sent = mq.store().statements_sent() - before.0 - hold_cost;
    let shared = mq.store().shared_requests() - before.1;
    println!("17 calls: {sent} requests, {shared} in a shared one");
    if answers.iter().filter(|a| **a == "sent").count() != 16 || answers[16] != "received" {
        return Err(format!("answers: {answers:?}").into());
    }
    if shared != 17 || sent != 1 {
        return Err(format!("17 one-statement calls took {sent} requests, {shared} shared").into());
    }

    // A group whose calls are not all of one statement: the others run alone after it.
    let (release, held) = hold(&mq).await?;
    let before = mq.store().shared_requests();
    let mut calls = sends(&mq, (0..4).map(|i| format!("n{i}")));
    queued(&mq, 4).await;
    {
        let mq = mq.clone();
        calls.push(tokio::spawn(async move {
            mq.send("missing", OutMessage::new("nowhere"))
                .await
                .map(|_| "sent to missing")
        }));
    }
    {
        let mq = mq.clone();
        calls.push(tokio::spawn(async move {
            let forged = LockRef {
                seq: mqlite_contract::SeqNumber(1),
                token: LockToken::random(),
            };
            mq.complete(Q, forged).await.map(|()| "forged complete")
        }));
    }
    queued(&mq, 6).await;
    release.send(())?;
    held.await??;
    for call in calls {
        match call.await? {
            Ok("sent") => {}
            Ok(other) => return Err(format!("{other} succeeded").into()),
            Err(Error::NotFound { .. } | Error::LockLost { .. }) => {}
            Err(e) => return Err(format!("unexpected error: {e}").into()),
        }
    }
    if mq.store().shared_requests() - before != 4 {
        return Err("the four sends did not share their request".into());
    }
    for m in stored(&mq, Q).await? {
        if !seqs.insert(m.seq) {
            return Err(format!("{:?} twice", m.seq).into());
        }
    }
    if seqs.len() != 21 {
        return Err(format!("{} messages stored, 21 expected", seqs.len()).into());
    }
    mq.close().await;
    Ok(())
}

/// A caller waiting for the stream holds no thread: it waits on its own task, and only
/// the leader of its group runs on a blocking thread. On a runtime of two blocking
/// threads, one of them taken by the application's transaction that holds the stream,
/// sixteen sends still all queue, and go out in one request. (When each caller waited on
/// a blocking thread of its own, one queued and fifteen waited for a thread.)
async fn callers_waiting_for_the_stream_hold_no_thread(dir: tempfile::TempDir) -> Outcome {
    let server = Sqld::start(&dir.path().join("sqld"))?;
    let mq = engine(&server).await?;
    let before = mq.store().shared_requests();
    let (release, held) = hold(&mq).await?;
    let calls = sends(&mq, (0..16).map(|i| format!("m{i}")));
    if tokio::time::timeout(Duration::from_secs(30), queued(&mq, 16))
        .await
        .is_err()
    {
        return Err(format!(
            "{} of 16 sends queued behind the held stream in 30 s",
            mq.store().waiting()
        )
        .into());
    }
    release.send(())?;
    held.await??;
    for call in calls {
        call.await??;
    }
    let shared = mq.store().shared_requests() - before;
    if shared != 16 {
        return Err(format!("16 queued sends: {shared} went in a shared request").into());
    }
    if stored(&mq, Q).await?.len() != 17 {
        return Err("the 16 sends were not all stored".into());
    }
    mq.close().await;
    Ok(())
}

/// The store's own close (`Store::close`, under the engine's gate) finishes the work
/// already admitted before it releases the owner's lease: 70 sends queued behind a held
/// stream take two groups (at most 64 each), and the leader lets the stream go between
/// them; a close called while they wait returns only once every one of them is
/// answered, and each is stored.
async fn the_stores_close_finishes_every_queued_call_first(dir: tempfile::TempDir) -> Outcome {
    use mqlite_contract::Store as _;
    let server = Sqld::start(&dir.path().join("sqld"))?;
    let mq = engine(&server).await?;
    let (release, held) = hold(&mq).await?;
    let calls = sends(&mq, (0..70).map(|i| format!("c{i}")));
    queued(&mq, 70).await;
    let closing = {
        let mq = mq.clone();
        tokio::spawn(async move { mq.store().close().await })
    };
    release.send(())?;
    held.await??;
    closing.await?;
    let unanswered = calls.iter().filter(|c| !c.is_finished()).count();
    if unanswered > 0 {
        return Err(format!("the close returned with {unanswered} of 70 sends unanswered").into());
    }
    for call in calls {
        call.await??;
    }
    if mq.send(Q, OutMessage::new("late")).await.is_ok() {
        return Err("a send after the close succeeded".into());
    }
    // A new owner (the lease was released) finds every send stored.
    let again =
        support::engine(server.url(), SystemClock::shared(), Duration::from_secs(60)).await?;
    let found = stored(&again, Q).await?.len();
    if found != 71 {
        return Err(format!("{found} messages stored, 71 expected").into());
    }
    again.close().await;
    Ok(())
}

/// Sends of one message each to two queues, some scheduled (other shared values),
/// queued together: they go out in one request, the sends of one queue and one timing
/// as one multi-row INSERT; every call is answered the number its own message was
/// stored under, and the numbers of one INSERT follow the calls' order. Two of the
/// three INSERTs hold messages of only a body (the shorter form); the third also holds
/// messages with a subject (the full form), and each keeps its own.
async fn a_groups_sends_to_one_queue_are_one_insert_numbered_in_order(
    dir: tempfile::TempDir,
) -> Outcome {
    let server = Sqld::start(&dir.path().join("sqld"))?;
    let mq = engine(&server).await?;
    mq.create_queue("other", QueueConfig::default()).await?;
    // Creating a queue made the owner forget the queues' rows: read both again.
    mq.send("other", OutMessage::new("first")).await?;
    mq.send(Q, OutMessage::new("second")).await?;
    let later = mq.clock().now_ms() + 3_600_000;
    let before = (mq.store().merged_sends(), mq.store().shared_requests());
    let (release, held) = hold(&mq).await?;
    let mut calls = Vec::new();
    for i in 0..24 {
        let (queue, options) = match i % 3 {
            0 => (Q, SendOptions::default()),
            1 => ("other", SendOptions::default()),
            _ => (
                Q,
                SendOptions {
                    scheduled_at_ms: Some(later),
                    ..Default::default()
                },
            ),
        };
        let body = format!("s{i}");
        let mut message = OutMessage::new(body.clone());
        if i % 6 == 3 {
            message.subject = Some(format!("subject of s{i}"));
        }
        let engine = mq.clone();
        let scheduled = options.scheduled_at_ms.is_some();
        calls.push((
            queue,
            scheduled,
            body.clone(),
            tokio::spawn(async move { engine.send_with(queue, message, options).await }),
        ));
        // One at a time, so the group holds them in this order.
        queued(&mq, i + 1).await;
    }
    release.send(())?;
    held.await??;
    let mut answered: Vec<(&str, bool, String, SeqNumber)> = Vec::new();
    for (queue, scheduled, body, call) in calls {
        answered.push((queue, scheduled, body, call.await??));
    }
    let shared = mq.store().shared_requests() - before.1;
    let merged = mq.store().merged_sends() - before.0;
    if shared != 24 || merged != 24 {
        return Err(format!(
            "of 24 sends, {shared} went in the shared request and {merged} in its three INSERTs"
        )
        .into());
    }
    for queue in [Q, "other"] {
        let messages = stored(&mq, queue).await?;
        for (q, scheduled, body, seq) in answered.iter().filter(|(q, ..)| *q == queue) {
            let m = messages
                .iter()
                .find(|m| m.seq == *seq)
                .ok_or_else(|| format!("{q}: no message under {seq:?}"))?;
            if m.content.body != body.as_bytes() {
                return Err(format!("{seq:?} holds another send's body").into());
            }
            let i: usize = body[1..].parse()?;
            let subject = (i % 6 == 3).then(|| format!("subject of {body}"));
            if m.content.subject != subject {
                return Err(format!("{seq:?}: subject {:?}", m.content.subject).into());
            }
            if (m.state == MessageState::Scheduled) != *scheduled {
                return Err(format!("{seq:?}: another send's timing").into());
            }
        }
    }
    // The numbers of each kind of send follow the calls' order.
    for kind in 0..3 {
        let seqs: Vec<SeqNumber> = answered
            .iter()
            .skip(kind)
            .step_by(3)
            .map(|(.., seq)| *seq)
            .collect();
        if !seqs.windows(2).all(|w| w[0] < w[1]) {
            return Err(format!("numbers out of order: {seqs:?}").into());
        }
    }
    let all: BTreeSet<SeqNumber> = answered.iter().map(|(.., seq)| *seq).collect();
    if all.len() != 24 {
        return Err("two sends were answered the same number".into());
    }
    mq.close().await;
    Ok(())
}

/// A statement the server refuses inside a shared request (a trigger refuses one body):
/// nothing of the request commits, every call of it runs alone, and the refused send
/// fails by itself while its fifteen neighbours are stored, each once.
async fn a_refused_statement_fails_alone_and_its_neighbours_commit(
    dir: tempfile::TempDir,
) -> Outcome {
    let server = Sqld::start(&dir.path().join("sqld"))?;
    let mq = engine(&server).await?;
    let side = libsql::Builder::new_remote(server.url().to_owned(), String::new())
        .build()
        .await?
        .connect()?;
    side.execute(
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON mqlite_messages \
         WHEN NEW.body = CAST('poison' AS BLOB) BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
        (),
    )
    .await?;
    let (release, held) = hold(&mq).await?;
    let before = mq.store().shared_requests();
    let bodies = (0..16).map(|i| {
        if i == 7 {
            "poison".to_owned()
        } else {
            format!("m{i}")
        }
    });
    let calls = sends(&mq, bodies);
    queued(&mq, 16).await;
    release.send(())?;
    held.await??;
    let mut failed = Vec::new();
    for (i, call) in calls.into_iter().enumerate() {
        if let Err(e) = call.await? {
            failed.push((i, e.to_string()));
        }
    }
    if failed.len() != 1 || failed[0].0 != 7 {
        return Err(format!("failed calls: {failed:?}").into());
    }
    if mq.store().shared_requests() != before {
        return Err("a refused shared request was counted as shared".into());
    }
    let mut bodies = stored_bodies(&mq, Q).await?;
    bodies.sort();
    let mut expected: Vec<Vec<u8>> = (0..16)
        .filter(|i| *i != 7)
        .map(|i| format!("m{i}").into_bytes())
        .chain([b"first".to_vec()])
        .collect();
    expected.sort();
    if bodies != expected {
        return Err(format!("stored {} bodies, not the 16 expected", bodies.len()).into());
    }
    mq.close().await;
    Ok(())
}

/// The server dies while a group waits: the request that would hold all of them gets
/// no answer, and every call of the group fails with a typed error (none is answered
/// Ok); after a restart nothing of theirs is stored.
async fn a_lost_request_fails_every_call_it_held(dir: tempfile::TempDir) -> Outcome {
    let mut server = Sqld::start(&dir.path().join("sqld"))?;
    let mq = engine(&server).await?;
    let (release, held) = hold(&mq).await?;
    let calls = sends(&mq, (0..8).map(|i| format!("lost-{i}")));
    queued(&mq, 8).await;
    server.kill();
    release.send(())?;
    // The holding transaction's COMMIT went out to a dead server: not a success.
    if held.await?.is_ok() {
        return Err("a commit to a dead server succeeded".into());
    }
    for call in calls {
        match call.await? {
            Ok(_) => return Err("a call of a lost request was answered Ok".into()),
            Err(e) if e.is_transient() || matches!(e, Error::OutcomeUnknown { .. }) => {}
            Err(e) => return Err(format!("an untyped error: {e:?}").into()),
        }
    }
    server.restart()?;
    let left = stored_bodies(&mq, Q).await?;
    if left != [b"first".to_vec()] {
        return Err(format!("{} messages stored after the outage", left.len()).into());
    }
    mq.close().await;
    Ok(())
}

/// The owner is deposed while a group waits for its stream: the group's shared request
/// carries the owner's epoch guard once, the server refuses it, and every call the
/// request held fails with `Deposed` (none is answered Ok, none runs again alone to
/// another answer); nothing of theirs is stored. The group forms behind an application
/// transaction that holds the stream and the server's write lock; the new owner's
/// takeover waits for that lock until sqld steals it (after 5 s), and the group goes out
/// once the holding transaction ends.
async fn a_deposed_owners_shared_request_fails_every_call_it_held(
    dir: tempfile::TempDir,
) -> Outcome {
    let server = Sqld::start(&dir.path().join("sqld"))?;
    let clock = ManualClock::new(1_700_000_000_000);
    let lease = Duration::from_secs(60);
    let first = support::engine(server.url(), clock.shared(), lease).await?;
    first.create_queue(Q, QueueConfig::default()).await?;
    // The queue's row is known from here on: a send of one is one statement.
    first.send(Q, OutMessage::new("first")).await?;
    let (release, held) = hold(&first).await?;
    let calls = sends(&first, (0..8).map(|i| format!("deposed-{i}")));
    queued(&first, 8).await;
    // The first owner's lease lapses (by the store clock); a second owner takes over.
    clock.advance(61_000);
    let second = support::engine(server.url(), clock.shared(), lease).await?;
    if second.store().epoch() <= first.store().epoch() {
        return Err("the takeover did not raise the epoch".into());
    }
    let sent = first.store().statements_sent();
    release.send(())?;
    // The holding transaction lost its lock to the takeover: not a success.
    if held.await?.is_ok() {
        return Err("the transaction whose lock was stolen committed".into());
    }
    for call in calls {
        match call.await? {
            Err(Error::Deposed { .. }) => {}
            other => return Err(format!("a call of the deposed group answered {other:?}").into()),
        }
    }
    // The group's calls went out together (its one request answered for all of them),
    // not each alone (a request or two each; 19 requests in all when a deposed owner's
    // shared request let its calls run alone). `statements_sent` counts requests.
    let requests = first.store().statements_sent() - sent;
    if requests >= 8 {
        return Err(format!("{requests} requests for a group of 8 calls").into());
    }
    // The owner knows it was deposed: its next call fails before reaching the server.
    let sent = first.store().statements_sent();
    match first.send(Q, OutMessage::new("later")).await {
        Err(Error::Deposed { .. }) => {}
        other => return Err(format!("the deposed owner's next send answered {other:?}").into()),
    }
    if first.store().statements_sent() != sent {
        return Err("a call of an owner that knows it was deposed reached the server".into());
    }
    let left = stored_bodies(&second, Q).await?;
    if left != [b"first".to_vec()] {
        return Err(format!("{} messages stored after the takeover", left.len()).into());
    }
    second.close().await;
    Ok(())
}

/// Rounds of a send of one, which teaches the owner the next number, then sixteen
/// concurrent sends of one, which go alone or merged in a group: the first request of
/// each round goes at the number known (`sends_at_known_number`), and between the
/// rounds a receive and a completion of every message (the largest number among them)
/// make the next round's first send read the number again. No number is handed out
/// twice, and each round's numbers are above every number before them (G1).
async fn concurrent_sends_after_a_send_go_at_the_number_known_and_never_repeat_one(
    dir: tempfile::TempDir,
) -> Outcome {
    let server = Sqld::start(&dir.path().join("sqld"))?;
    let mq = engine(&server).await?;
    let mut seen: BTreeSet<SeqNumber> = BTreeSet::new();
    let mut top = SeqNumber(0);
    for round in 0..5 {
        let at = mq.store().sends_at_known_number();
        let merged = mq.store().merged_sends();
        let first = mq.send(Q, OutMessage::new(format!("lead {round}"))).await?;
        let calls: Vec<_> = (0..16)
            .map(|i| {
                let mq = mq.clone();
                tokio::spawn(
                    async move { mq.send(Q, OutMessage::new(format!("{round}-{i}"))).await },
                )
            })
            .collect();
        let mut numbers = vec![first];
        for call in calls {
            numbers.push(call.await??);
        }
        let used = mq.store().sends_at_known_number() - at;
        println!(
            "round {round}: {used} requests at a number known, {} sends merged",
            mq.store().merged_sends() - merged
        );
        if used == 0 {
            return Err(format!("round {round}: no request went at the number known").into());
        }
        for n in &numbers {
            if *n <= top || !seen.insert(*n) {
                return Err(format!("round {round}: number {n:?} again or below {top:?}").into());
            }
        }
        top = numbers.iter().copied().max().unwrap_or(top);
        // Every message received and completed, the largest number among them.
        loop {
            let got = mq.receive(Q, ReceiveOptions::batch(64)).await?;
            if got.is_empty() {
                break;
            }
            let locks: Vec<LockRef> = got.iter().map(LockRef::from).collect();
            mq.complete_batch(Q, &locks).await?;
        }
    }
    mq.close().await;
    Ok(())
}
