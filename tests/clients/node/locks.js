// Two libraries built on Lua scripts, unchanged, through the proxy over
// ioredis: rate-limiter-flexible's RateLimiterRedis (an INCR-and-EXPIRE
// script) and redlock (lock, extend and unlock scripts, EVALSHA first).
//
// Usage: node tests/clients/node/locks.js PORT
// Exits non-zero on the first failure; prints one line per library.
"use strict";

const assert = require("node:assert/strict");
const Redis = require("ioredis");
const { RateLimiterRedis } = require("rate-limiter-flexible");
const Redlock = require("redlock");

const port = Number(process.argv[2]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function rateLimiter(r) {
  const limiter = new RateLimiterRedis({ storeClient: r, keyPrefix: "rl", points: 5, duration: 2 });
  for (const user of ["alice", "bob", "carol"]) {
    for (let i = 1; i <= 5; i++) {
      const res = await limiter.consume(user);
      assert.equal(res.remainingPoints, 5 - i);
      assert.equal(res.consumedPoints, i);
    }
    const refused = await limiter.consume(user).then(
      () => assert.fail(`${user}: a sixth point within the window was granted`),
      (res) => res
    );
    assert.equal(refused.remainingPoints, 0);
    assert.ok(refused.msBeforeNext > 0 && refused.msBeforeNext <= 2000, `msBeforeNext ${refused.msBeforeNext}`);
  }
  // Each key is its own counter, wherever the proxy put it.
  assert.equal((await limiter.get("alice")).consumedPoints, 6);
  await limiter.delete("bob");
  assert.equal(await limiter.get("bob"), null);
  assert.equal((await limiter.consume("bob")).remainingPoints, 4);
  // Concurrent consumers never get more than the points in the window.
  const granted = await Promise.allSettled(Array.from({ length: 50 }, () => limiter.consume("dave")));
  assert.equal(granted.filter((g) => g.status === "fulfilled").length, 5);
  // The window passes and the points come back.
  await sleep(2100);
  assert.equal((await limiter.consume("alice")).remainingPoints, 4);
  console.log(`rate-limiter-flexible ${require("rate-limiter-flexible/package.json").version}: limits hold`);
}

async function redlock(r) {
  const lock = new Redlock([r], { retryCount: 0, driftFactor: 0.01 });
  const waiting = new Redlock([r], { retryCount: 100, retryDelay: 5, retryJitter: 5 });
  const first = await lock.lock("locks:order:1", 1000);
  // Held: a second taker is refused until it is released.
  await lock.lock("locks:order:1", 1000).then(
    () => assert.fail("a held lock was taken twice"),
    (e) => assert.ok(e instanceof Redlock.LockError, String(e))
  );
  const extended = await first.extend(2000);
  assert.ok(extended.expiration > first.expiration - 1000);
  assert.ok((await r.pttl("locks:order:1")) > 1000);
  await extended.unlock();
  assert.equal(await r.exists("locks:order:1"), 0);
  // A lock that expires is free again.
  await lock.lock("locks:order:2", 100);
  await sleep(150);
  await (await lock.lock("locks:order:2", 1000)).unlock();
  // Several resources in one lock share a hash tag, so one node holds them all.
  const both = await lock.lock(["locks:{cart}:a", "locks:{cart}:b"], 1000);
  assert.equal(await r.exists("locks:{cart}:a", "locks:{cart}:b"), 2);
  await both.unlock();
  // Mutual exclusion: read-modify-write under the lock from 20 tasks at once.
  await r.set("locks:counter", 0);
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      const l = await waiting.lock("locks:counter:lock", 2000);
      const v = Number(await r.get("locks:counter"));
      await sleep(2);
      await r.set("locks:counter", v + 1);
      await l.unlock();
    })
  );
  assert.equal(await r.get("locks:counter"), "20");
  console.log(`redlock ${require("redlock/package.json").version}: exclusion holds`);
}

async function main() {
  const r = new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: 0 });
  await r.del("rl:alice", "rl:bob", "rl:carol", "rl:dave");
  await rateLimiter(r);
  await redlock(r);
  r.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
