//! `mqlite`: runs the mqlite broker (`mqlite serve`), talks to a running one over the
//! v1 wire contract (every other subcommand but `backup` and `trace`), backs up a local
//! SQLite store (`mqlite backup`) and traces an event across databases (`mqlite
//! trace`).
//!
//! Errors print `mqlite: <error>` to stderr and exit 1; bad usage exits 2.

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

mod args;
mod backup;
mod logs;
mod mcp;
mod migrate;
mod output;
mod remote;
mod serve;
mod trace;
mod vacuum;

use args::{Cli, Command, Output};
use mqlite_broker::VERSION;

/// Why a command failed, as printed after `mqlite: `, and its exit status: 1 when the
/// broker (or the command itself) refused, 3 when the broker could not be reached (2,
/// bad usage, is clap's).
#[derive(Debug)]
pub(crate) struct Failure(String, u8);

/// The exit status of a command the broker could not be reached for.
const UNREACHABLE: u8 = 3;

impl From<String> for Failure {
    fn from(text: String) -> Self {
        Failure(text, 1)
    }
}

impl From<&str> for Failure {
    fn from(text: &str) -> Self {
        Failure(text.to_owned(), 1)
    }
}

impl From<mqlite_broker::ClientError> for Failure {
    fn from(e: mqlite_broker::ClientError) -> Self {
        match &e {
            mqlite_broker::ClientError::Transport { .. } => Failure(chain(&e), UNREACHABLE),
            mqlite_broker::ClientError::Api { status: 401, .. } => Failure(
                format!(
                    "{}\n(give a token with --token or MQLITE_TOKEN: an administrator token, \
                     or an access key's)",
                    chain(&e)
                ),
                1,
            ),
            _ => Failure(chain(&e), 1),
        }
    }
}

impl From<mqlite_broker::BrokerError> for Failure {
    fn from(e: mqlite_broker::BrokerError) -> Self {
        Failure(chain(&e), 1)
    }
}

/// An error and its sources, each source once.
pub(crate) use mqlite::error_chain as chain;

/// Usage errors clap's declarations cannot express (exit 2, as clap's own).
fn validate(cli: &Cli) -> Result<(), clap::Error> {
    if let Command::CreateQueue(a) = &cli.command
        && a.kind == args::Kind::Topic
        && a.options.any()
    {
        return Err(Cli::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            "a topic takes no queue options (--lock-duration-ms, --max-delivery-count, \
             --default-ttl-ms, --dedup-window-ms, --ordering-mode, --dead-letter-on-expire, \
             --dlq-*)",
        ));
    }
    Ok(())
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Serve(mut a) => {
            a.db = cli.db.unwrap_or_default();
            serve::run(a)
        }
        Command::Backup(a) => backup::run(&a, cli.output),
        Command::Migrate(a) => migrate::run(&a, cli.output),
        Command::Mcp => mcp::run(cli.endpoint, cli.token, cli.db),
        Command::Completions { shell } => {
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "mqlite", &mut std::io::stdout());
            Ok(())
        }
        Command::Man => {
            let mut page = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut page)
                .map_err(|e| Failure::from(format!("cannot render the man page: {e}")))?;
            output::line(String::from_utf8_lossy(&page).trim_end())
        }
        Command::Vacuum(a) => {
            if cli
                .endpoint
                .as_deref()
                .is_some_and(|e| !e.trim().is_empty())
            {
                return Err(
                    "vacuum works on a local file, not through a broker: give --db \
                            (MQLITE_DB) and no --endpoint"
                        .into(),
                );
            }
            vacuum::run(&a, cli.db.as_deref(), cli.output)
        }
        Command::Trace(a) => trace::run(a, cli.output),
        Command::Version => match cli.output {
            Output::Json => output::json(&serde_json::json!({ "version": VERSION })),
            Output::Table => output::line(&format!("mqlite {VERSION}")),
        },
        command => runtime()?.block_on(async {
            let client = connect(cli.endpoint, cli.token, cli.db, false).await?;
            let done = remote::run(&client, cli.output, command).await;
            if let Some(local) = client.in_process() {
                local.close().await;
            }
            done
        }),
    }
}

/// The runtime a one-shot command runs its calls on (one thread: it waits on one call
/// at a time).
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::from(format!("cannot start the async runtime: {e}")))
}

/// The broker `--endpoint` names; without one, the store `--db` names, opened in this
/// process (embedded mode); without either, the broker on the default address.
pub(crate) async fn connect(
    endpoint: Option<String>,
    token: Option<String>,
    db: Option<String>,
    background: bool,
) -> Result<mqlite_broker::Client, Failure> {
    let set = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
    match (set(endpoint), set(db)) {
        (Some(endpoint), _) => Ok(mqlite_broker::Client::new(endpoint, token)),
        (None, Some(db)) => {
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
            let mut config =
                mqlite_broker::BrokerConfig::new(addr, db.clone(), mqlite_broker::AuthConfig::Off);
            // One command's work needs no sweeps behind it (a claim reclaims expired
            // leases itself; due messages are due by the clock); a server's does.
            config.background = background;
            let local = mqlite_broker::Local::open(&config).await.map_err(|e| {
                let locked = matches!(
                    &e,
                    mqlite_broker::BrokerError::Store(mqlite::Error::DbLocked { .. })
                );
                let mut f = Failure::from(e);
                if locked {
                    f.0.push_str(
                        "\n(if `mqlite serve` holds it, call that broker with --endpoint \
                         instead of --db)",
                    );
                }
                f
            })?;
            Ok(mqlite_broker::Client::local(local, db))
        }
        (None, None) => Ok(mqlite_broker::Client::new(DEFAULT_ENDPOINT, token)),
    }
}

/// The broker a client subcommand calls when neither --endpoint nor --db is given.
const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:6754";

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = validate(&cli) {
        e.exit();
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(mut text, status)) => {
            if text.contains("left out of this build") {
                // The facade names its own feature; this command's is the one to build.
                text.push_str(
                    "\n(the mqlite command: cargo install --path crates/cli --locked \
                     --features libsql)",
                );
            }
            eprintln!("mqlite: {text}");
            ExitCode::from(status)
        }
    }
}
