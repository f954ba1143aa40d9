// BullMQ, unchanged, through the proxy: one producer adds JOBS jobs (some
// delayed, some failing once and retried) and two workers process them. Every
// job must complete exactly once, with the attempts its options asked for.
//
// BullMQ runs every queue operation as a Lua script over several keys, so the
// queue's keys share one hash tag (the `{bull}` prefix BullMQ's own docs give
// for Redis Cluster) and land on one node.
//
// Usage: node tests/clients/node/bullmq.js PORT JOBS
// Exits non-zero on the first failure; prints one summary line.
"use strict";

const assert = require("node:assert/strict");
const { Queue, Worker, QueueEvents } = require("bullmq");

const port = Number(process.argv[2]);
const njobs = Number(process.argv[3] || 10000);
const connection = { host: "127.0.0.1", port, maxRetriesPerRequest: null };
const prefix = "{bull}";
const name = "shardis-jobs";

// Every 50th job fails on its first attempt and succeeds on its retry; every
// 100th is delayed.
const failsOnce = (i) => i % 50 === 7;
const delayed = (i) => i % 100 === 3;

async function main() {
  const queue = new Queue(name, { connection, prefix });
  await queue.obliterate({ force: true });
  const events = new QueueEvents(name, { connection, prefix });
  await events.waitUntilReady();

  const runs = new Map(); // job index -> times its processor finished
  const attempts = new Map(); // job index -> attempts the processor saw
  let completed = 0;
  let settle;
  const allDone = new Promise((resolve) => (settle = resolve));
  const processor = async (job) => {
    const i = job.data.i;
    attempts.set(i, (attempts.get(i) || 0) + 1);
    if (failsOnce(i) && job.attemptsMade === 0) {
      throw new Error(`job ${i} fails once`);
    }
    runs.set(i, (runs.get(i) || 0) + 1);
    return i * 2;
  };
  const workers = [1, 2].map(() => {
    const w = new Worker(name, processor, { connection, prefix, concurrency: 20 });
    w.on("completed", () => {
      completed += 1;
      if (completed === njobs) settle();
    });
    w.on("error", (e) => {
      console.error("worker error:", e);
      process.exit(1);
    });
    return w;
  });

  const batch = [];
  for (let i = 0; i < njobs; i++) {
    const opts = { jobId: `job-${i}`, removeOnComplete: false };
    if (failsOnce(i)) Object.assign(opts, { attempts: 2, backoff: { type: "fixed", delay: 10 } });
    if (delayed(i)) opts.delay = 200;
    batch.push({ name: "work", data: { i }, opts });
    if (batch.length === 500 || i === njobs - 1) {
      await queue.addBulk(batch.splice(0));
    }
  }

  const timer = setTimeout(() => {
    console.error(`timed out: ${completed} of ${njobs} completed`);
    process.exit(1);
  }, 150000);
  await allDone;
  clearTimeout(timer);

  for (let i = 0; i < njobs; i++) {
    assert.equal(runs.get(i), 1, `job ${i} completed ${runs.get(i) || 0} times`);
    assert.equal(attempts.get(i), failsOnce(i) ? 2 : 1, `job ${i} attempts`);
  }
  const counts = await queue.getJobCounts("completed", "failed", "wait", "active", "delayed");
  assert.deepEqual(counts, { completed: njobs, failed: 0, wait: 0, active: 0, delayed: 0 });
  const job = await queue.getJob("job-7");
  assert.equal(job.returnvalue, 14);
  assert.equal(job.attemptsMade, 2);

  await Promise.all(workers.map((w) => w.close()));
  await events.close();
  await queue.obliterate({ force: true });
  await queue.close();
  const retried = [...attempts.values()].filter((a) => a === 2).length;
  console.log(`bullmq ${require("bullmq/package.json").version}: ${njobs} jobs completed once each, ${retried} retried`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
