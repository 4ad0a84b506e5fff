//! The command line: every subcommand and flag, each flag also read from its
//! `MQLITE_*` environment variable where it has one (the flag wins).

mod serve;

pub(crate) use serve::*;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// mqlite: a message queue in one SQLite file.
///
/// `mqlite serve` runs the broker. The other subcommands talk to a running broker over
/// its HTTP/JSON wire contract (`--endpoint`, `--token`), or, given `--db` (MQLITE_DB)
/// and no endpoint, run the same calls on that store in this process (embedded mode).
/// `backup` and `trace` read database files directly.
#[derive(Debug, Parser)]
#[command(name = "mqlite", version, propagate_version = true)]
pub(crate) struct Cli {
    /// The broker to talk to [default: http://127.0.0.1:6754]; given, it wins over
    /// --db.
    #[arg(
        long,
        visible_alias = "url",
        env = "MQLITE_ENDPOINT",
        global = true,
        value_name = "URL",
        help_heading = "Global options"
    )]
    pub(crate) endpoint: Option<String>,

    /// The bearer token to call the broker with (an administrator token or an access
    /// key's token).
    #[arg(
        long,
        env = "MQLITE_TOKEN",
        global = true,
        hide_env_values = true,
        value_name = "TOKEN",
        help_heading = "Global options"
    )]
    pub(crate) token: Option<String>,

    /// The store: a file path, `:memory:`, `redb:<path>`, `libsql://...` (in a build with
    /// the `libsql` feature). For `serve`, the store it serves [default: ./mqlite.db]; for
    /// the other subcommands, without --endpoint, the store they run on in this process
    /// (embedded mode; no broker may hold a local file meanwhile).
    #[arg(
        long,
        env = "MQLITE_DB",
        global = true,
        value_name = "LOCATION",
        help_heading = "Global options"
    )]
    pub(crate) db: Option<String>,

    /// How to print answers: aligned columns for people, or the wire response as JSON
    /// for scripts.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t = Output::Table,
        help_heading = "Global options"
    )]
    pub(crate) output: Output,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// How answers are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// Human-readable aligned columns.
    Table,
    /// The wire response object, pretty-printed JSON.
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the broker until SIGTERM or SIGINT.
    Serve(ServeArgs),
    /// Create a queue (or a topic); on an existing one, replace its whole configuration
    /// (options not given take their defaults: see update-queue).
    CreateQueue(CreateQueueArgs),
    /// Change only the given options of an existing queue; the others keep their
    /// values. Prints the resulting configuration.
    UpdateQueue(UpdateQueueArgs),
    /// List every queue, topic and subscription.
    #[command(visible_alias = "list")]
    ListQueues,
    /// Send one message; prints its sequence number.
    Send(SendArgs),
    /// Send one message for delivery at a later time; prints its sequence number
    /// (cancel it before then with `cancel`).
    Schedule(ScheduleArgs),
    /// Receive messages; prints them and completes them (unless --no-complete, or
    /// --delete: receive-and-delete).
    Receive(ReceiveArgs),
    /// Receive deferred messages by sequence number; prints them with their lock tokens.
    ReceiveDeferred(ReceiveDeferredArgs),
    /// Cancel a scheduled message before it is due.
    Cancel(CancelArgs),
    /// Print this program's version.
    Version,
    /// Print a shell completion script: `mqlite completions bash >
    /// /etc/bash_completion.d/mqlite` (zsh: into a directory of $fpath as `_mqlite`;
    /// fish: `~/.config/fish/completions/mqlite.fish`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `mqlite man > /usr/local/share/man/man1/mqlite.1`.
    Man,
    /// Serve the queue to an AI agent: a Model Context Protocol server on stdin/stdout
    /// (JSON-RPC 2.0, one message per line) with 14 tools (list_queues, create_queue,
    /// send, receive, complete, abandon, renew, defer, receive_deferred, reject, peek,
    /// stats, redrive, purge), over the broker --endpoint (or MQLITE_URL) names, or the
    /// store --db names.
    Mcp,
    /// Complete a received message (it is done).
    Complete(SettleArgs),
    /// Abandon a received message (deliver it again).
    Abandon(AbandonArgs),
    /// Reject a received message (dead-letter it).
    Reject(RejectArgs),
    /// Defer a received message (set it aside until received by number).
    Defer(SettleArgs),
    /// Renew the lock of a received message; prints the new lease end.
    Renew(SettleArgs),
    /// Look at messages without locking them.
    Peek(PeekArgs),
    /// A queue's message counts.
    #[command(visible_alias = "metrics")]
    Stats(QueueArg),
    /// Move a queue's dead letters back to it (or to --target).
    Redrive(RedriveArgs),
    /// Delete a queue's dead letters.
    Purge(PurgeArgs),
    /// Pause a queue: its sends are refused and its receives get nothing (or only one
    /// side, with --sends or --receives); messages and held locks are untouched.
    Pause(PauseArgs),
    /// Resume a paused queue: it takes sends and hands out messages again.
    Resume(QueueArg),
    /// Delete a queue (or a topic, or a subscription) and every message it holds;
    /// refused without --yes.
    DeleteQueue(DeleteQueueArgs),
    /// Recurring schedules: a message sent to a queue at every tick of a cron
    /// expression or an interval, once per tick however many brokers serve the data.
    #[command(subcommand, visible_alias = "schedules")]
    Recurring(RecurringCommand),
    /// Subscribe to a topic: a subscription (a queue of its own) receiving the messages
    /// sent to the topic that its filter accepts (every message without --filter).
    /// Again with the same name: its filter is replaced.
    #[command(visible_alias = "create-subscription")]
    Subscribe(SubscribeArgs),
    /// Delete a subscription, with its backing queue and its messages.
    Unsubscribe(UnsubscribeArgs),
    /// List every subscription with its filter.
    #[command(visible_alias = "list-subscriptions")]
    Subscriptions,
    /// Check a filter expression without storing anything and, given a sample message
    /// (any of --body, --subject, --property, --content-type), whether it matches.
    TestFilter(TestFilterArgs),
    /// The broker's status: version, store, size, uptime.
    Status,
    /// Manage access keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Give a local SQLite file's free pages back to the file system (--db or
    /// MQLITE_DB); not a broker call.
    ///
    /// Without --full, frees the pages a drained backlog left (files made by this
    /// version; a broker's janitor also does it in bounded steps). --full rewrites the
    /// whole file, converting one made by an earlier version. Stop the broker that
    /// serves the file first: vacuum needs it to itself.
    Vacuum(VacuumArgs),
    /// Copy a local SQLite database of an earlier mqlite layout into a new file of this
    /// version's layout; not a broker call.
    ///
    /// Copies every queue, topic and subscription, every message in its state (leases
    /// and their tokens, schedules, dead letters), dedup entries, receipts, receive
    /// attempts, access keys, the inbox and the relay, then checks the counts. Offline:
    /// stop the broker first (both files are held for the copy). The old file is only
    /// read; an existing destination is refused.
    Migrate(MigrateArgs),
    /// Copy a local SQLite database consistently (VACUUM INTO); not a broker call.
    ///
    /// Safe while a broker serves the file: the copy is one read transaction's
    /// snapshot. The source is opened read-only; an existing destination is refused.
    Backup(BackupArgs),
    /// Where one event stopped: a row per boundary (the producer's relay outbox, the
    /// queue, each consumer's inbox) with its evidence and what it cannot tell.
    ///
    /// Reads the databases directly (paths, redb:…, libsql://…), not through a broker;
    /// a local file another process holds open is refused (DbLocked): trace it from
    /// that process with the library's `Trace`, or after it stops. Opening reclaims a
    /// stopped process's orphaned leases, as any open does; the trace writes nothing.
    Trace(TraceArgs),
}

/// The kinds CreateQueue makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Kind {
    /// A queue.
    Queue,
    /// A topic (subscriptions receive its messages).
    Topic,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Queue => "queue",
            Kind::Topic => "topic",
        }
    }
}

/// A queue's delivery order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub(crate) enum OrderingMode {
    /// No order promised.
    Standard,
    /// In order within a group_id.
    GroupFifo,
    /// In order across the queue.
    StrictFifo,
}

impl OrderingMode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            OrderingMode::Standard => "standard",
            OrderingMode::GroupFifo => "group_fifo",
            OrderingMode::StrictFifo => "strict_fifo",
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct CreateQueueArgs {
    /// The queue's name.
    pub(crate) name: String,
    /// queue or topic (a topic takes none of the queue options).
    #[arg(long, value_enum, default_value_t = Kind::Queue)]
    pub(crate) kind: Kind,
    #[command(flatten)]
    pub(crate) options: QueueOptions,
}

#[derive(Debug, Args)]
pub(crate) struct UpdateQueueArgs {
    /// The queue's name.
    pub(crate) name: String,
    #[command(flatten)]
    pub(crate) options: QueueOptions,
}

/// A queue's options, each optional: create-queue gives the defaults to those not
/// given, update-queue keeps their values.
#[derive(Debug, Args)]
pub(crate) struct QueueOptions {
    /// Lease length of a receive, ms (default 30000).
    #[arg(long, value_name = "MS")]
    pub(crate) lock_duration_ms: Option<i64>,
    /// Deliveries before a message is dead-lettered (default 10).
    #[arg(long, value_name = "N")]
    pub(crate) max_delivery_count: Option<i64>,
    /// Default time to live, ms (default 0: none).
    #[arg(long, value_name = "MS")]
    pub(crate) default_ttl_ms: Option<i64>,
    /// Duplicate-detection window by message id, ms (default 0: off).
    #[arg(long, value_name = "MS")]
    pub(crate) dedup_window_ms: Option<i64>,
    /// Delivery order.
    #[arg(long, value_enum)]
    pub(crate) ordering_mode: Option<OrderingMode>,
    /// Whether an expired message is dead-lettered (true) or discarded (false, the
    /// default).
    #[arg(long, value_name = "BOOL")]
    pub(crate) dead_letter_on_expire: Option<bool>,
    /// Drop dead letters older than this, ms (0: the broker's default; -1: never).
    #[arg(long, value_name = "MS", allow_hyphen_values = true)]
    pub(crate) dlq_max_age_ms: Option<i64>,
    /// Keep at most this many dead letters (0: the broker's default; -1: unbounded).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub(crate) dlq_max_count: Option<i64>,
    /// Keep at most this many bytes of dead-letter bodies (0: the broker's default; -1:
    /// unbounded).
    #[arg(long, value_name = "BYTES", allow_hyphen_values = true)]
    pub(crate) dlq_max_bytes: Option<i64>,
    /// Move dead letters to this queue (an empty name: keep them in the queue).
    #[arg(long, value_name = "QUEUE")]
    pub(crate) dead_letter_target: Option<String>,
    /// Refuse sends without a message id (true) or deduplicate an id-less message by
    /// its body (false, the default).
    #[arg(long, value_name = "BOOL")]
    pub(crate) require_message_id: Option<bool>,
}

impl QueueOptions {
    /// The options given, as the wire's configuration (None: not given).
    pub(crate) fn config(&self) -> mqlite_broker::wire::WireQueueConfig {
        mqlite_broker::wire::WireQueueConfig {
            kind: None,
            lock_duration_ms: self.lock_duration_ms,
            max_delivery_count: self.max_delivery_count,
            default_ttl_ms: self.default_ttl_ms,
            dead_letter_on_expire: self.dead_letter_on_expire,
            dedup_window_ms: self.dedup_window_ms,
            ordering_mode: self.ordering_mode.map(|m| m.as_str().to_owned()),
            dlq_max_age_ms: self.dlq_max_age_ms,
            dlq_max_count: self.dlq_max_count,
            dlq_max_bytes: self.dlq_max_bytes,
            dead_letter_target: self.dead_letter_target.clone(),
            require_message_id: self.require_message_id,
            status: None,
        }
    }

    /// Whether any queue option is given (a topic takes none).
    pub(crate) fn any(&self) -> bool {
        self.lock_duration_ms.is_some()
            || self.max_delivery_count.is_some()
            || self.default_ttl_ms.is_some()
            || self.dedup_window_ms.is_some()
            || self.ordering_mode.is_some()
            || self.dead_letter_on_expire.is_some()
            || self.dlq_max_age_ms.is_some()
            || self.dlq_max_count.is_some()
            || self.dlq_max_bytes.is_some()
            || self.dead_letter_target.is_some()
            || self.require_message_id.is_some()
    }
}

/// A message to send: what `send` and `schedule` share.
#[derive(Debug, Args)]
pub(crate) struct MessageArgs {
    /// The queue (or topic).
    pub(crate) queue: String,
    /// The body, as text (`-`: read standard input).
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub(crate) body: Option<String>,
    /// Read the body from this file (`-`: standard input).
    #[arg(long, value_name = "PATH")]
    pub(crate) file: Option<PathBuf>,
    /// The producer's message id (duplicate detection).
    #[arg(long, value_name = "ID")]
    pub(crate) message_id: Option<String>,
    /// The ordering group.
    #[arg(long, visible_alias = "group", value_name = "G")]
    pub(crate) group_id: Option<String>,
    /// A routing label (filters see it as `subject`).
    #[arg(long, value_name = "TEXT")]
    pub(crate) subject: Option<String>,
    /// Where a reply should go.
    #[arg(long, value_name = "QUEUE")]
    pub(crate) reply_to: Option<String>,
    /// Correlates a reply with its request.
    #[arg(long, value_name = "ID")]
    pub(crate) correlation_id: Option<String>,
    /// Priority 0 ..= 9: on a standard queue a higher one is received first.
    #[arg(long, value_name = "0-9", value_parser = clap::value_parser!(i64).range(0..=9))]
    pub(crate) priority: Option<i64>,
    /// Time to live, ms.
    #[arg(long, value_name = "MS", conflicts_with = "ttl")]
    pub(crate) ttl_ms: Option<i64>,
    /// Time to live, a duration (30s, 15m, 2h, 7d) or ms.
    #[arg(long, value_name = "DURATION")]
    pub(crate) ttl: Option<String>,
    /// The event's CloudEvents source; with --event-id, its identity and dedup key.
    #[arg(long, value_name = "URI", requires = "event_id")]
    pub(crate) event_source: Option<String>,
    /// The event's CloudEvents id.
    #[arg(long, value_name = "ID", requires = "event_source")]
    pub(crate) event_id: Option<String>,
    /// The event's CloudEvents type.
    #[arg(long, value_name = "TYPE", requires = "event_id")]
    pub(crate) event_type: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct SendArgs {
    #[command(flatten)]
    pub(crate) message: MessageArgs,
    /// Deliver no earlier than this time, epoch ms.
    #[arg(long, value_name = "EPOCH_MS", conflicts_with = "delay")]
    pub(crate) at_ms: Option<i64>,
    /// Deliver no earlier than this long from now, a duration (30s, 15m, 2h) or ms.
    #[arg(long, value_name = "DURATION")]
    pub(crate) delay: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ScheduleArgs {
    #[command(flatten)]
    pub(crate) message: MessageArgs,
    /// When to deliver it: an RFC 3339 time (2027-01-02T15:04:05Z) or a duration from
    /// now (30s, 15m, 2h, 7d).
    #[arg(long, value_name = "TIME|DURATION")]
    pub(crate) at: String,
}

#[derive(Debug, Args)]
pub(crate) struct ReceiveArgs {
    /// The queue (or subscription).
    pub(crate) queue: String,
    /// At most this many messages (1..=256).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub(crate) max: i64,
    /// Wait up to this long for a message, ms (at most 20000).
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub(crate) wait_ms: i64,
    /// Leave the messages locked and print their lock tokens, to settle them later
    /// with complete, abandon, reject, defer or renew.
    #[arg(long, visible_alias = "no-ack", conflicts_with = "delete")]
    pub(crate) no_complete: bool,
    /// Receive-and-delete: the messages leave the queue as they are received (nothing
    /// to settle; a message whose handling fails is lost).
    #[arg(long)]
    pub(crate) delete: bool,
    /// Print only the bodies, each's bytes exactly as sent and a newline (a table
    /// shows a binary body as base64).
    #[arg(long)]
    pub(crate) raw: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ReceiveDeferredArgs {
    /// The queue.
    pub(crate) queue: String,
    /// The deferred messages' sequence numbers.
    #[arg(required = true)]
    pub(crate) seqs: Vec<i64>,
}

#[derive(Debug, Args)]
pub(crate) struct CancelArgs {
    /// The queue.
    pub(crate) queue: String,
    /// The scheduled message's sequence number.
    pub(crate) seq: i64,
}

#[derive(Debug, Args)]
pub(crate) struct SettleArgs {
    /// The queue.
    pub(crate) queue: String,
    /// The message's sequence number.
    pub(crate) seq: i64,
    /// The lock token its receive printed.
    pub(crate) lock_token: String,
}

#[derive(Debug, Args)]
pub(crate) struct AbandonArgs {
    #[command(flatten)]
    pub(crate) lock: SettleArgs,
    /// Deliver it again after this long, ms.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub(crate) delay_ms: i64,
}

#[derive(Debug, Args)]
pub(crate) struct RejectArgs {
    #[command(flatten)]
    pub(crate) lock: SettleArgs,
    /// The dead-letter reason.
    #[arg(long, default_value = "")]
    pub(crate) reason: String,
    /// The dead-letter description.
    #[arg(long, default_value = "")]
    pub(crate) description: String,
}

#[derive(Debug, Args)]
pub(crate) struct PeekArgs {
    /// The queue.
    pub(crate) queue: String,
    /// Start at this sequence number (inclusive).
    #[arg(long, visible_alias = "from", value_name = "N")]
    pub(crate) from_seq: Option<i64>,
    /// Only messages in this state.
    #[arg(
        long,
        value_name = "STATE",
        value_parser = ["active", "locked", "deferred", "scheduled", "dead_lettered"]
    )]
    pub(crate) state: Option<String>,
    /// At most this many (default 32, max 1000).
    #[arg(long, value_name = "N")]
    pub(crate) max: Option<i64>,
    /// Print only the bodies, each's bytes exactly as sent and a newline.
    #[arg(long)]
    pub(crate) raw: bool,
}

#[derive(Debug, Args)]
pub(crate) struct QueueArg {
    /// The queue.
    pub(crate) queue: String,
}

#[derive(Debug, Args)]
pub(crate) struct RedriveArgs {
    /// The queue whose dead letters move.
    pub(crate) queue: String,
    /// Move them to this queue instead.
    #[arg(long, visible_alias = "to", value_name = "T")]
    pub(crate) target: Option<String>,
    /// At most this many (0: all).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub(crate) max: i64,
    /// Only dead letters at least this old, ms.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub(crate) older_than_ms: i64,
    /// At most this many per second (0: unthrottled).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub(crate) rate_per_sec: i64,
    /// Only these dead letters (repeat the flag, or separate with commas).
    #[arg(long = "seq", value_name = "SEQ", value_delimiter = ',')]
    pub(crate) seq_numbers: Vec<i64>,
}

#[derive(Debug, Args)]
pub(crate) struct PauseArgs {
    /// The queue (or subscription: its receives only).
    pub(crate) queue: String,
    /// Pause only its sends (status send_disabled).
    #[arg(long, conflicts_with = "receives")]
    pub(crate) sends: bool,
    /// Pause only its receives (status receive_disabled).
    #[arg(long)]
    pub(crate) receives: bool,
}

impl PauseArgs {
    /// The status asked for.
    pub(crate) fn status(&self) -> &'static str {
        match (self.sends, self.receives) {
            (true, false) => "send_disabled",
            (false, true) => "receive_disabled",
            _ => "disabled",
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum RecurringCommand {
    /// Create a recurring schedule, or replace the definition of the one of that name:
    /// `mqlite recurring create nightly reports '{"report":"daily"}' --cron "0 2 * * 1-5"
    /// --tz Europe/Paris`, or `--every 5m`. Each tick's message id is `<name>@<tick ms>`.
    Create(Box<RecurringCreateArgs>),
    /// List the schedules with their next tick and how many messages each fired.
    List,
    /// Delete a schedule (the messages it sent stay).
    Delete {
        /// The schedule's name.
        name: String,
    },
}

#[derive(Debug, Args)]
pub(crate) struct RecurringCreateArgs {
    /// The schedule's name.
    pub(crate) name: String,
    #[command(flatten)]
    pub(crate) message: MessageArgs,
    /// Tick at this interval from now: a duration (30s, 5m, 1h) or ms; at least 1s.
    #[arg(
        long,
        value_name = "DURATION",
        required_unless_present = "cron",
        conflicts_with = "cron"
    )]
    pub(crate) every: Option<String>,
    /// Tick at every time this cron expression names: five fields (minute hour
    /// day-of-month month day-of-week), or six with seconds first.
    #[arg(long, value_name = "EXPR")]
    pub(crate) cron: Option<String>,
    /// The IANA time zone the cron expression is read in (default UTC).
    #[arg(long, value_name = "ZONE", requires = "cron")]
    pub(crate) tz: Option<String>,
    /// Send nothing for a window of ticks missed while nothing ran (or the queue was
    /// paused); by default one message stands for the whole window.
    #[arg(long)]
    pub(crate) skip_missed: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PurgeArgs {
    /// The queue whose dead letters are deleted.
    pub(crate) queue: String,
    /// At most this many (0: all).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub(crate) max: i64,
    /// Only dead letters at least this old, ms.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub(crate) older_than_ms: i64,
}

#[derive(Debug, Args)]
pub(crate) struct SubscribeArgs {
    /// The topic.
    pub(crate) topic: String,
    /// The subscription's name (also the name of the queue to receive from).
    pub(crate) name: String,
    /// A boolean expression in the expr language over the message (subject,
    /// properties, body_json, ...); see `test-filter`.
    #[arg(long, visible_alias = "expr", value_name = "EXPR")]
    pub(crate) filter: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct DeleteQueueArgs {
    /// The queue, topic or subscription.
    pub(crate) name: String,
    /// Confirms that the queue and its messages are to be deleted.
    #[arg(long)]
    pub(crate) yes: bool,
}

#[derive(Debug, Args)]
pub(crate) struct UnsubscribeArgs {
    /// The topic.
    pub(crate) topic: String,
    /// The subscription's name.
    pub(crate) name: String,
}

#[derive(Debug, Args)]
pub(crate) struct TestFilterArgs {
    /// The filter expression.
    pub(crate) expr: String,
    /// The sample message's body, as text.
    #[arg(long, value_name = "TEXT")]
    pub(crate) body: Option<String>,
    /// The sample message's subject.
    #[arg(long, value_name = "S")]
    pub(crate) subject: Option<String>,
    /// A property of the sample message, key=value (repeatable).
    #[arg(long = "property", value_name = "KEY=VALUE", value_parser = parse_property)]
    pub(crate) properties: Vec<(String, String)>,
    /// The sample message's content type.
    #[arg(long, value_name = "CT")]
    pub(crate) content_type: Option<String>,
}

impl TestFilterArgs {
    /// Whether a sample message is described.
    pub(crate) fn has_sample(&self) -> bool {
        self.body.is_some()
            || self.subject.is_some()
            || !self.properties.is_empty()
            || self.content_type.is_some()
    }
}

fn parse_property(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

/// What an access key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Permission {
    /// Send, Schedule, Cancel.
    Send,
    /// Receive, settle, Peek, Stats.
    Listen,
    /// Administration.
    Manage,
}

impl Permission {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Permission::Send => "send",
            Permission::Listen => "listen",
            Permission::Manage => "manage",
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum KeyCommand {
    /// Create an access key; prints its token, which is shown only this once.
    Create(KeyCreateArgs),
    /// List access keys (never their tokens).
    List(KeyListArgs),
    /// Revoke an access key.
    Revoke {
        /// The key's id.
        id: String,
    },
}

#[derive(Debug, Args)]
pub(crate) struct KeyCreateArgs {
    /// A human name for the key.
    pub(crate) name: String,
    /// What it may do (repeatable, or comma-separated).
    #[arg(long, value_enum, required = true, value_delimiter = ',')]
    pub(crate) permission: Vec<Permission>,
    /// Its public id, 32 hexadecimal characters (default: a random one).
    #[arg(long, value_name = "HEX32")]
    pub(crate) id: Option<String>,
    /// When it stops working, epoch ms (default: never).
    #[arg(long, value_name = "EPOCH_MS")]
    pub(crate) expires_at_ms: Option<i64>,
}

#[derive(Debug, Args)]
pub(crate) struct KeyListArgs {
    /// Start after this key id (the previous page's last).
    #[arg(long, value_name = "ID")]
    pub(crate) after_id: Option<String>,
    /// At most this many (default 100, max 1000).
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<i64>,
}

#[derive(Debug, Args)]
pub(crate) struct VacuumArgs {
    /// Rewrite the whole file (needs free disk space about its size).
    #[arg(long)]
    pub(crate) full: bool,
}

#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    /// The database of the earlier layout (read, never changed).
    pub(crate) old_path: PathBuf,
    /// The new database to write (must not exist).
    pub(crate) new_path: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct BackupArgs {
    /// The SQLite database to copy (opened read-only).
    pub(crate) db_path: PathBuf,
    /// Where to write the copy (must not exist).
    pub(crate) dest_path: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct TraceArgs {
    /// The event's CloudEvents source.
    #[arg(long)]
    pub(crate) source: String,
    /// The event's CloudEvents id.
    #[arg(long)]
    pub(crate) id: String,
    /// The producer's database (its relay outbox).
    #[arg(long, value_name = "LOCATION")]
    pub(crate) producer: Option<String>,
    /// The queue's database.
    #[arg(long, value_name = "LOCATION", requires = "queue")]
    pub(crate) queue_db: Option<String>,
    /// The queue's name.
    #[arg(long, value_name = "NAME", requires = "queue_db")]
    pub(crate) queue: Option<String>,
    /// The consumers' database (their inbox).
    #[arg(long, value_name = "LOCATION")]
    pub(crate) consumer_db: Option<String>,
    /// A consumer expected to apply the event (repeatable).
    #[arg(long = "consumer", value_name = "NAME", requires = "consumer_db")]
    pub(crate) consumers: Vec<String>,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
