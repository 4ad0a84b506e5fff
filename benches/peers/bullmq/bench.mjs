// Benchmark of BullMQ (a job queue on Redis), a peer of mqlite.
//
// Needs a Redis server on 127.0.0.1 at $REDIS_PORT (run.sh starts Debian's redis-server
// with AOF on, appendfsync everysec, on a fresh directory). Each scenario uses a queue
// of its own and removes finished jobs (removeOnComplete), as mqlite deletes them.
//
// Scenarios:
//   enqueue_single  N x queue.add() from one producer, each awaited
//   enqueue_bulk    N jobs through queue.addBulk() in batches of 64
//   end_to_end      4 producers (async loops awaiting queue.add()) add N jobs in total
//                   while 4 workers (Worker, concurrency 1 each, no-op handler) process
//                   them; first add -> last completion
//
// Prints one JSON line per scenario on stdout:
//   {"peer":"bullmq","scenario":"enqueue_single","n":20000,"jobs_per_sec":...}
//
// Usage: REDIS_PORT=6390 node bench.mjs [--n 20000]

import { performance } from "node:perf_hooks";
import { Queue, Worker } from "bullmq";

const PAYLOAD = "x".repeat(256);
const BATCH = 64;
const PRODUCERS = 4;
const WORKERS = 4;

const args = process.argv.slice(2);
let n = Number(process.env.N || 20000);
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--n") n = Number(args[++i]);
}
const connection = { host: "127.0.0.1", port: Number(process.env.REDIS_PORT || 6390) };
const jobOptions = { removeOnComplete: true, removeOnFail: true };

function report(scenario, secs, extra = {}) {
  const line = { peer: "bullmq", scenario, n, jobs_per_sec: Math.round(n / secs), secs: Number(secs.toFixed(3)), ...extra };
  console.log(JSON.stringify(line));
}

async function freshQueue(name) {
  const queue = new Queue(name, { connection, defaultJobOptions: jobOptions });
  await queue.waitUntilReady();
  await queue.obliterate({ force: true });
  return queue;
}

async function enqueueSingle() {
  const queue = await freshQueue("single");
  const start = performance.now();
  for (let i = 0; i < n; i++) await queue.add("bench", { p: PAYLOAD });
  report("enqueue_single", (performance.now() - start) / 1000);
  await queue.obliterate({ force: true });
  await queue.close();
}

async function enqueueBulk() {
  const queue = await freshQueue("bulk");
  const start = performance.now();
  for (let done = 0; done < n; done += BATCH) {
    const size = Math.min(BATCH, n - done);
    await queue.addBulk(Array.from({ length: size }, () => ({ name: "bench", data: { p: PAYLOAD } })));
  }
  report("enqueue_bulk", (performance.now() - start) / 1000, { batch: BATCH });
  await queue.obliterate({ force: true });
  await queue.close();
}

async function endToEnd() {
  const queue = await freshQueue("e2e");
  let completed = 0;
  let finish;
  const allDone = new Promise((resolve) => (finish = resolve));
  const workers = Array.from({ length: WORKERS }, () => {
    const w = new Worker("e2e", async () => {}, { connection, concurrency: 1, autorun: false });
    w.on("completed", () => {
      completed += 1;
      if (completed === n) finish(performance.now());
    });
    return w;
  });
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  for (const w of workers) w.run();
  const start = performance.now();
  const per = Math.ceil(n / PRODUCERS);
  await Promise.all(
    Array.from({ length: PRODUCERS }, async (_, p) => {
      const count = Math.min(per, n - p * per);
      for (let i = 0; i < count; i++) await queue.add("bench", { p: PAYLOAD });
    }),
  );
  const end = await allDone;
  report("end_to_end", (end - start) / 1000, { producers: PRODUCERS, workers: WORKERS });
  await Promise.all(workers.map((w) => w.close()));
  await queue.obliterate({ force: true });
  await queue.close();
}

await enqueueSingle();
await enqueueBulk();
await endToEnd();
process.exit(0);
