//! Bad input gets a typed error, never a panic, and changes nothing.

use std::time::Duration;

use mqlite::{
    Engine, Error, LockRef, LockToken, OutMessage, PeekOptions, QueueConfig, ReceiveOptions,
    SendOptions, SeqNumber, Store,
};

/// Every test runs on the typed engine and on the run-time (dyn) one.
macro_rules! both_engines {
    ($($name:ident => $body:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn typed() {
                let mq = mqlite::Engine::open(":memory:").await.expect("open");
                super::$body(super::seeded(mq).await).await;
            }

            #[tokio::test]
            async fn dyn_engine() {
                let mq = mqlite::open(":memory:").await.expect("open");
                super::$body(super::seeded(mq).await).await;
            }
        }
    )*};
}

both_engines! {
    names_configs_and_limits => names_configs_and_limits_are_refused_with_typed_errors,
    missing_queue => a_missing_queue_is_not_found_everywhere,
}

async fn seeded<S: Store>(mq: mqlite::GenericEngine<S>) -> mqlite::GenericEngine<S> {
    mq.create_queue("q", QueueConfig::default())
        .await
        .expect("queue");
    mq.send("q", OutMessage::new("kept")).await.expect("send");
    mq
}

#[allow(dead_code)]
type Typed = Engine;

fn invalid<T: std::fmt::Debug>(r: Result<T, Error>) {
    assert!(
        matches!(r, Err(Error::InvalidArgument(_))),
        "expected InvalidArgument, got {r:?}"
    );
}

fn not_found<T: std::fmt::Debug>(r: Result<T, Error>) {
    assert!(
        matches!(r, Err(Error::NotFound { .. })),
        "expected NotFound, got {r:?}"
    );
}

async fn names_configs_and_limits_are_refused_with_typed_errors<S: Store>(
    mq: mqlite::GenericEngine<S>,
) {
    for name in ["", "has space", "tab\there", &"x".repeat(257)] {
        invalid(mq.create_queue(name, QueueConfig::default()).await);
        invalid(mq.send(name, OutMessage::new("x")).await);
    }
    for config in [
        QueueConfig {
            lock_duration: Duration::ZERO,
            ..Default::default()
        },
        QueueConfig {
            lock_duration: Duration::from_secs(24 * 3600 + 1),
            ..Default::default()
        },
        QueueConfig {
            max_delivery_count: 0,
            ..Default::default()
        },
        QueueConfig {
            default_ttl: Duration::MAX,
            ..Default::default()
        },
        QueueConfig {
            dedup_window: Duration::MAX,
            ..Default::default()
        },
    ] {
        invalid(mq.create_queue("bad", config).await);
    }
    let big = OutMessage::new(vec![0u8; (1 << 20) + 1]);
    assert!(matches!(
        mq.send("q", big).await,
        Err(Error::MessageTooLarge { size, limit }) if size == (1 << 20) + 1 && limit == 1 << 20
    ));
    invalid(mq.send_batch("q", vec![]).await);
    invalid(mq.send_batch("q", vec![OutMessage::new("x"); 1001]).await);
    let out_of_range = |ttl, at| SendOptions {
        ttl,
        scheduled_at_ms: at,
    };
    invalid(
        mq.send_with(
            "q",
            OutMessage::new("x"),
            out_of_range(Some(Duration::MAX), None),
        )
        .await,
    );
    invalid(
        mq.send_with("q", OutMessage::new("x"), out_of_range(None, Some(-1)))
            .await,
    );
    invalid(
        mq.send("q", OutMessage::new("x").with_id("bad\u{0}id"))
            .await,
    );
    let waiting = |wait| ReceiveOptions {
        wait,
        ..Default::default()
    };
    invalid(mq.receive("q", ReceiveOptions::batch(0)).await);
    invalid(
        mq.receive("q", waiting(Duration::from_millis(20_001)))
            .await,
    );
    invalid(mq.receive("q", waiting(Duration::MAX)).await);
    invalid(
        mq.receive(
            "q",
            ReceiveOptions {
                attempt_id: Some("a\nb".into()),
                ..Default::default()
            },
        )
        .await,
    );
    invalid(
        mq.peek(
            "q",
            PeekOptions {
                max: 0,
                ..Default::default()
            },
        )
        .await,
    );
    invalid(
        mq.peek(
            "q",
            PeekOptions {
                max: 1001,
                ..Default::default()
            },
        )
        .await,
    );
    let lock = LockRef {
        seq: SeqNumber(1),
        token: LockToken::random(),
    };
    invalid(
        mq.abandon("q", lock, Duration::from_secs(8 * 24 * 3600))
            .await,
    );
    invalid(mq.renew_batch("q", &[]).await);
    invalid(mq.complete_batch("q", &[]).await);
    invalid(mq.receive_deferred("q", &[]).await);
    invalid(mq.reject("q", lock, &"r".repeat(5000), "").await);
    invalid(
        mq.redrive(
            "q",
            mqlite::RedriveOptions {
                older_than: Duration::MAX,
                ..Default::default()
            },
        )
        .await,
    );
    invalid(
        mq.redrive(
            "q",
            mqlite::RedriveOptions {
                seq_numbers: Some((1..=1001).map(mqlite::SeqNumber).collect()),
                ..Default::default()
            },
        )
        .await,
    );
    invalid(
        mq.purge(
            "q",
            mqlite::PurgeOptions {
                older_than: Duration::MAX,
                max: 0,
                every_state: false,
            },
        )
        .await,
    );
    for text in [
        "",
        "xyz",
        "0123456789abcdef0123456789abcdeg",
        "+123456789abcdef0123456789abcdef",
    ] {
        invalid(text.parse::<LockToken>());
    }
    // Nothing changed.
    let stats = mq.stats("q").await.expect("stats");
    assert_eq!((stats.total, stats.active), (1, 1));
    assert_eq!(mq.list_queues().await.expect("list").len(), 1);
    mq.close().await;
}

async fn a_missing_queue_is_not_found_everywhere<S: Store>(mq: mqlite::GenericEngine<S>) {
    let lock = LockRef {
        seq: SeqNumber(1),
        token: LockToken::random(),
    };
    not_found(mq.send("nope", OutMessage::new("x")).await);
    not_found(mq.receive_one("nope").await);
    not_found(mq.complete("nope", lock).await);
    not_found(mq.renew("nope", lock).await);
    not_found(mq.peek("nope", PeekOptions::default()).await);
    not_found(mq.stats("nope").await);
    not_found(mq.cancel("nope", SeqNumber(1)).await);
    not_found(mq.redrive("nope", Default::default()).await);
    not_found(
        mq.redrive(
            "q",
            mqlite::RedriveOptions {
                target: Some("nope".into()),
                ..Default::default()
            },
        )
        .await,
    );
    not_found(mq.purge("nope", Default::default()).await);
    not_found(mq.update_queue("nope", QueueConfig::default()).await);
    assert!(!mq.delete_queue("nope").await.expect("delete"));
    assert!(mq.delete_queue("q").await.expect("delete"));
    not_found(mq.stats("q").await);
    mq.close().await;
    assert!(matches!(
        mq.send("q", OutMessage::new("x")).await,
        Err(Error::Closed)
    ));
}
