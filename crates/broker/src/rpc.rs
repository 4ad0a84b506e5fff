//! The RPCs of the wire contract: the facade's [`mqlite::remote::Rpc`], shared by the
//! server and every client.

pub use mqlite::remote::Rpc;
