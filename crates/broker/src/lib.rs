//! The mqlite broker: the queue over HTTP/JSON, speaking the public mqlite v1 wire
//! contract (`POST /mqlite.v1.<Service>/<Method>`, JSON in and out), so mqlite clients,
//! consoles and curl scripts work against it unchanged. One broker is the one writer of
//! its store; processes that cannot share a file talk to it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), mqlite_broker::BrokerError> {
//! use mqlite_broker::{AuthConfig, Broker, BrokerConfig};
//! let config = BrokerConfig::new(
//!     "127.0.0.1:6754".parse().expect("an address"),
//!     "./mqlite.db",
//!     AuthConfig::Tokens(vec!["secret".into()]),
//! );
//! let broker = Broker::start(config).await?;
//! broker.run_until(async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```

mod auth;
pub mod client;
pub mod config;
pub mod conn;
pub mod console;
pub mod memory;
mod prom;
pub mod rpc;
mod server;
mod sqs;

/// The mqlite v1 wire types (the facade's [`mqlite::remote::wire`]).
pub use mqlite::remote::wire;

pub use client::{Client, ClientError};
pub use config::{AuthConfig, BrokerConfig, DEFAULT_ADDR, DEFAULT_DB};
pub use conn::ConnLimits;
pub use console::ASSET_BYTES as CONSOLE_ASSET_BYTES;
pub use memory::MemoryLimits;
pub use rpc::Rpc;
pub use server::{Broker, BrokerError, Local, MAX_REQUEST_BYTES, VERSION};
