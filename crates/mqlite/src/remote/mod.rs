//! The queue on a broker (`mqlite serve`), with the embedded engine's types: a typed
//! [`Client`] whose methods are the engine's (the same [`Message`](crate::Message),
//! options and [`Error`](crate::Error) variants) and a worker over it with the
//! embedded worker's API, so moving between an embedded engine and a broker is one
//! line. Behind the `remote` feature.
//!
//! ```no_run
//! # async fn demo() -> mqlite::Result<()> {
//! let mq = mqlite::remote::Client::connect("mqlite://my-token@127.0.0.1:6754")?;
//! mq.create_queue("jobs", mqlite::QueueConfig::default()).await?;
//! mq.send("jobs", mqlite::OutMessage::new("hello")).await?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! # drop(stop);
//! let report = mq
//!     .worker("jobs", |m| async move {
//!         println!("{}", String::from_utf8_lossy(m.body()));
//!         Ok(())
//!     })
//!     .concurrency(4)
//!     .run_until(async {
//!         let _ = stopped.await;
//!     })
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! Beneath it: [`wire`], the v1 wire contract's request and answer types (the broker
//! serves the same ones), [`Rpc`], and [`Http`], one untyped POST per RPC.

mod client;
mod http;
mod rpc;
pub mod wire;

pub use client::{Client, Dsn};
pub use http::{ClientError, Http, decode, encode};
pub use rpc::Rpc;
