// Benchmark of plainjob (SQLite job queue on better-sqlite3), a peer of mqlite.
//
// Scenarios (each on a fresh SQLite file in its own temporary directory):
//   enqueue_single  N x queue.add() from one producer
//   enqueue_bulk    N jobs through queue.addMany() in batches of 64 (one transaction each)
//   end_to_end      4 producer threads queue.add() N jobs in total while 4 worker threads
//                   (defineWorker, no-op handler) process them; first add -> last done
// Only with --variants:
//   end_to_end_poll_10ms, end_to_end_poll_100ms  end_to_end with a longer worker poll
//   end_to_end_one_thread  the same 4 producers and 4 workers as async loops on the main
//                   thread over one connection
//
// Prints one JSON line per scenario on stdout:
//   {"peer":"plainjob","scenario":"enqueue_single","n":20000,"jobs_per_sec":...}
//
// Usage: node bench.mjs [--n 20000] [--variants]   (or N=20000 in the environment)

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { better, defineQueue, defineWorker, JobStatus } from "plainjob";

const JOB_TYPE = "bench";
const PAYLOAD = "x".repeat(256); // 256-byte payload (stored JSON-serialized: 258 bytes)
const BATCH = 64;
const PRODUCERS = 4;
const WORKERS = 4;
// plainjob's worker sleeps `pollIntervall` ms whenever it finds no job (default 1000).
// 1 ms is the lowest useful value: Node clamps setTimeout(0) to 1 ms anyway.
const POLL_MS = 1;

// plainjob logs every job at debug level through its logger (console by default).
const noopLogger = { error() {}, warn() {}, info() {}, debug() {} };

// Control words shared between the threads of end_to_end.
const READY = 0; // threads that have opened their connection
const START = 1; // set to 1 by the main thread when the clock starts
const DONE = 2; // jobs completed

function now() {
  // Absolute milliseconds, comparable across worker threads.
  return performance.timeOrigin + performance.now();
}

function openQueue(file) {
  const db = new Database(file);
  // defineQueue itself sets journal_mode=WAL, synchronous=1 (NORMAL), busy_timeout=5000
  // on this connection and creates its tables if missing.
  return defineQueue({ connection: better(db), logger: noopLogger });
}

function freshDb() {
  const dir = mkdtempSync(join(tmpdir(), "plainjob-bench-"));
  return { dir, file: join(dir, "queue.db") };
}

function countDone(queue) {
  return queue.countJobs({ type: JOB_TYPE, status: JobStatus.Done });
}

// ---------------------------------------------------------------------------------------
// Thread bodies of end_to_end.

async function threadMain() {
  const { role, file, count, n, ctl, pollMs } = workerData;
  const c = new Int32Array(ctl);
  const queue = openQueue(file);
  if (role === "producer") {
    Atomics.add(c, READY, 1);
    parentPort.postMessage({ kind: "ready" });
    Atomics.wait(c, START, 0);
    for (let i = 0; i < count; i++) queue.add(JOB_TYPE, PAYLOAD);
    parentPort.postMessage({ kind: "produced", count });
    queue.close();
    return;
  }
  // role === "worker"
  const worker = defineWorker(JOB_TYPE, async () => {}, {
    queue,
    pollIntervall: pollMs,
    logger: noopLogger,
    // Called after markJobAsDone has committed.
    onCompleted: () => {
      if (Atomics.add(c, DONE, 1) + 1 === n) {
        parentPort.postMessage({ kind: "all_done", at: now() });
      }
    },
  });
  parentPort.on("message", async (m) => {
    if (m === "stop") {
      await worker.stop();
      // Let the polling loop notice the stop before the connection closes.
      await new Promise((r) => setTimeout(r, 20));
      queue.close();
      parentPort.close();
    }
  });
  Atomics.add(c, READY, 1);
  parentPort.postMessage({ kind: "ready" });
  void worker.start();
}

// ---------------------------------------------------------------------------------------
// Scenarios, run on the main thread.

function enqueueSingle(n) {
  const { dir, file } = freshDb();
  const queue = openQueue(file);
  const t0 = now();
  for (let i = 0; i < n; i++) queue.add(JOB_TYPE, PAYLOAD);
  const secs = (now() - t0) / 1000;
  const stored = queue.countJobs({ type: JOB_TYPE });
  queue.close();
  rmSync(dir, { recursive: true, force: true });
  if (stored !== n) throw new Error(`enqueue_single stored ${stored} of ${n}`);
  return { secs };
}

function enqueueBulk(n) {
  const { dir, file } = freshDb();
  const queue = openQueue(file);
  const batches = [];
  for (let i = 0; i < n; i += BATCH) {
    batches.push(new Array(Math.min(BATCH, n - i)).fill(PAYLOAD));
  }
  const t0 = now();
  for (const batch of batches) queue.addMany(JOB_TYPE, batch);
  const secs = (now() - t0) / 1000;
  const stored = queue.countJobs({ type: JOB_TYPE });
  queue.close();
  rmSync(dir, { recursive: true, force: true });
  if (stored !== n) throw new Error(`enqueue_bulk stored ${stored} of ${n}`);
  return { secs, batch: BATCH };
}

async function endToEnd(n, pollMs = POLL_MS) {
  const { dir, file } = freshDb();
  // Create the schema once before the threads open their own connections.
  openQueue(file).close();
  const ctl = new SharedArrayBuffer(4 * 4);
  const c = new Int32Array(ctl);
  const self = fileURLToPath(import.meta.url);
  const threads = [];
  let readyCount = 0;
  let onReady;
  const allReady = new Promise((r) => (onReady = r));
  let onDone;
  const allDone = new Promise((r) => (onDone = r));
  const spawn = (role, count) => {
    const t = new Worker(self, { workerData: { role, file, count, n, ctl, pollMs } });
    t.on("message", (m) => {
      if (m.kind === "ready" && ++readyCount === PRODUCERS + WORKERS) onReady();
      if (m.kind === "all_done") onDone(m.at);
    });
    t.on("error", (e) => {
      console.error(e);
      process.exit(1);
    });
    threads.push(new Promise((r) => t.once("exit", r)));
    return t;
  };
  const workers = [];
  for (let w = 0; w < WORKERS; w++) workers.push(spawn("worker", 0));
  for (let p = 0; p < PRODUCERS; p++) {
    const share = Math.floor(n / PRODUCERS) + (p < n % PRODUCERS ? 1 : 0);
    spawn("producer", share);
  }
  await allReady;
  // Let the workers reach their idle polling loop before the clock starts.
  await new Promise((r) => setTimeout(r, 200));
  const t0 = now();
  Atomics.store(c, START, 1);
  Atomics.notify(c, START);
  const t1 = await allDone;
  const secs = (t1 - t0) / 1000;
  for (const w of workers) w.postMessage("stop");
  await Promise.all(threads);
  const check = openQueue(file);
  const done = countDone(check);
  check.close();
  rmSync(dir, { recursive: true, force: true });
  if (done !== n) throw new Error(`end_to_end: ${done} of ${n} jobs marked done`);
  return { secs, producers: PRODUCERS, workers: WORKERS, poll_ms: pollMs, threads: "worker_threads" };
}

async function endToEndOneThread(n) {
  const { dir, file } = freshDb();
  const queue = openQueue(file);
  let done = 0;
  let t1;
  let onDone;
  const allDone = new Promise((r) => (onDone = r));
  const workers = [];
  for (let w = 0; w < WORKERS; w++) {
    const worker = defineWorker(JOB_TYPE, async () => {}, {
      queue,
      pollIntervall: POLL_MS,
      logger: noopLogger,
      onCompleted: () => {
        if (++done === n) {
          t1 = now();
          onDone();
        }
      },
    });
    workers.push(worker);
    void worker.start();
  }
  await new Promise((r) => setTimeout(r, 200));
  const t0 = now();
  const producers = [];
  for (let p = 0; p < PRODUCERS; p++) {
    const share = Math.floor(n / PRODUCERS) + (p < n % PRODUCERS ? 1 : 0);
    producers.push(
      (async () => {
        for (let i = 0; i < share; i++) {
          queue.add(JOB_TYPE, PAYLOAD);
          // Yield so producers and workers interleave on the one event loop.
          await new Promise((r) => setImmediate(r));
        }
      })(),
    );
  }
  await Promise.all(producers);
  await allDone;
  const secs = (t1 - t0) / 1000;
  await Promise.all(workers.map((w) => w.stop()));
  const stored = countDone(queue);
  queue.close();
  rmSync(dir, { recursive: true, force: true });
  if (stored !== n) throw new Error(`end_to_end_one_thread: ${stored} of ${n} done`);
  return { secs, producers: PRODUCERS, workers: WORKERS, poll_ms: POLL_MS, threads: "one event loop" };
}

function parseArgs() {
  let n = Number(process.env.N ?? 20000);
  let variants = false;
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--n") n = Number(argv[++i]);
    else if (argv[i].startsWith("--n=")) n = Number(argv[i].slice(4));
    else if (argv[i] === "--variants") variants = true;
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!Number.isInteger(n) || n <= 0) throw new Error(`bad n: ${n}`);
  return { n, variants };
}

function emit(scenario, n, r) {
  const { secs, ...extra } = r;
  console.log(
    JSON.stringify({
      peer: "plainjob",
      scenario,
      n,
      jobs_per_sec: Math.round(n / secs),
      secs: Number(secs.toFixed(3)),
      ...extra,
    }),
  );
}

async function main() {
  const { n, variants } = parseArgs();
  emit("enqueue_single", n, enqueueSingle(n));
  emit("enqueue_bulk", n, enqueueBulk(n));
  emit("end_to_end", n, await endToEnd(n));
  if (variants) {
    emit("end_to_end_poll_10ms", n, await endToEnd(n, 10));
    emit("end_to_end_poll_100ms", n, await endToEnd(n, 100));
    emit("end_to_end_one_thread", n, await endToEndOneThread(n));
  }
}

if (isMainThread) {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
} else {
  threadMain().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
