//! The RPCs of the wire contract: their paths and the permission each needs.

use crate::Permission;

macro_rules! permission {
    (Any) => {
        None
    };
    ($p:ident) => {
        Some(Permission::$p)
    };
}

macro_rules! rpcs {
    ($($name:ident => $service:literal, $need:ident;)*) => {
        /// One RPC of the wire contract.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Rpc {
            $(
                #[doc = concat!("`", $service, "/", stringify!($name), "`")]
                $name,
            )*
        }

        impl Rpc {
            /// Every RPC the broker serves.
            pub const ALL: &'static [Rpc] = &[$(Rpc::$name),*];

            /// The method name (`Send`).
            pub fn method(self) -> &'static str {
                match self { $(Rpc::$name => stringify!($name)),* }
            }

            /// `Service/Method` (`QueueService/Send`), the metrics' `rpc` label.
            pub fn label(self) -> &'static str {
                match self { $(Rpc::$name => concat!($service, "/", stringify!($name))),* }
            }

            /// The service (`QueueService`).
            pub fn service(self) -> &'static str {
                match self { $(Rpc::$name => $service),* }
            }

            /// The permission an access key needs to call it (None: any valid
            /// credential).
            pub fn needs(self) -> Option<Permission> {
                match self { $(Rpc::$name => permission!($need)),* }
            }
        }
    };
}

rpcs! {
    Send => "QueueService", Send;
    Schedule => "QueueService", Send;
    Cancel => "QueueService", Send;
    Receive => "QueueService", Listen;
    Complete => "QueueService", Listen;
    Abandon => "QueueService", Listen;
    Reject => "QueueService", Listen;
    Defer => "QueueService", Listen;
    Renew => "QueueService", Listen;
    CompleteBatch => "QueueService", Listen;
    RenewBatch => "QueueService", Listen;
    ReceiveDeferred => "QueueService", Listen;
    Peek => "QueueService", Listen;
    Stats => "QueueService", Listen;
    CreateQueue => "AdminService", Manage;
    Subscribe => "AdminService", Manage;
    ListSubscriptions => "AdminService", Manage;
    Unsubscribe => "AdminService", Manage;
    DeleteQueue => "AdminService", Manage;
    TestFilter => "AdminService", Manage;
    ListQueues => "AdminService", Manage;
    Redrive => "AdminService", Manage;
    Purge => "AdminService", Manage;
    SetQueueStatus => "AdminService", Manage;
    CreateSchedule => "AdminService", Manage;
    ListSchedules => "AdminService", Manage;
    DeleteSchedule => "AdminService", Manage;
    Status => "AdminService", Manage;
    CreateKey => "AuthService", Manage;
    ListKeys => "AuthService", Manage;
    RevokeKey => "AuthService", Manage;
    WhoAmI => "AuthService", Any;
}

impl Rpc {
    /// Its path: `/mqlite.v1.<Service>/<Method>`.
    pub fn path(self) -> String {
        format!("/mqlite.v1.{}", self.label())
    }

    /// The RPC a path names.
    pub fn from_path(path: &str) -> Option<Rpc> {
        Rpc::ALL.iter().copied().find(|r| r.path() == path)
    }
}
