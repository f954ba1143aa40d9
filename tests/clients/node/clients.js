// Unmodified Node.js Redis clients against the proxy: ioredis 5, node-redis 4
// and node-redis 6, each through its own API (pipelines, multi-key commands,
// its SCAN iterator over every key, hashes when the nodes serve them).
//
// Usage: node tests/clients/node/clients.js PORT KEYS [--types]
// Exits non-zero on the first failure; prints one line per client.
"use strict";

const assert = require("node:assert/strict");

const port = Number(process.argv[2]);
const nkeys = Number(process.argv[3] || 20000);
const types = process.argv.includes("--types");

// Writes `nkeys` keys under `prefix` with MSET batches, returns their names.
async function load(mset, prefix) {
  const names = [];
  for (let i = 0; i < nkeys; i += 1000) {
    const batch = {};
    for (let j = i; j < Math.min(i + 1000, nkeys); j++) {
      batch[`${prefix}${j}`] = String(j);
      names.push(`${prefix}${j}`);
    }
    await mset(batch);
  }
  return names;
}

// Every written key must come back at least once from the iterator.
function checkWalk(name, names, seen) {
  const missing = names.filter((k) => !seen.has(k));
  assert.equal(missing.length, 0, `${name}: SCAN missed ${missing.length} keys, e.g. ${missing.slice(0, 3)}`);
}

async function ioredis() {
  const Redis = require("ioredis");
  const r = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 0 });
  await r.connect();
  assert.equal(await r.ping(), "PONG");
  assert.equal(await r.set("io:user:42", '{"name":"ada"}'), "OK");
  assert.equal(await r.get("io:user:42"), '{"name":"ada"}');
  assert.deepEqual(await r.mget("io:user:42", "io:missing"), ['{"name":"ada"}', null]);
  const p = r.pipeline();
  for (let i = 0; i < 200; i++) p.set(`io:p${i}`, i).get(`io:p${i}`);
  const out = await p.exec();
  for (let i = 0; i < 200; i++) assert.equal(out[2 * i + 1][1], String(i));
  const names = await load((b) => r.mset(b), "io:scan:");
  const seen = new Set();
  await new Promise((resolve, reject) => {
    const s = r.scanStream({ match: "io:scan:*", count: 500 });
    s.on("data", (keys) => keys.forEach((k) => seen.add(k)));
    s.on("end", resolve);
    s.on("error", reject);
  });
  checkWalk("ioredis scanStream", names, seen);
  if (types) {
    await r.hset("io:h", { a: "1", b: "2" });
    assert.deepEqual(await r.hgetall("io:h"), { a: "1", b: "2" });
    assert.equal(await r.lpush("io:l", "x", "y"), 2);
    assert.deepEqual(await r.lrange("io:l", 0, -1), ["y", "x"]);
  }
  r.disconnect();
  return `ioredis ${require("ioredis/package.json").version}`;
}

async function nodeRedis(pkg, prefix) {
  const { createClient } = require(pkg);
  const c = createClient({ socket: { host: "127.0.0.1", port, reconnectStrategy: false } });
  c.on("error", () => {});
  await c.connect();
  assert.equal(await c.ping(), "PONG");
  assert.equal(await c.set(`${prefix}user:42`, "ada"), "OK");
  assert.equal(await c.get(`${prefix}user:42`), "ada");
  assert.deepEqual(await c.mGet([`${prefix}user:42`, `${prefix}missing`]), ["ada", null]);
  const replies = await Promise.all(
    Array.from({ length: 200 }, (_, i) => c.incr(`${prefix}ctr${i % 7}`)),
  );
  assert.equal(replies.length, 200);
  const names = await load((b) => c.mSet(b), `${prefix}scan:`);
  const seen = new Set();
  for await (const item of c.scanIterator({ MATCH: `${prefix}scan:*`, COUNT: 500 })) {
    // node-redis 4 yields keys one by one; 5 and later yield each batch.
    for (const k of Array.isArray(item) ? item : [item]) seen.add(k);
  }
  checkWalk(`${pkg} scanIterator`, names, seen);
  if (types) {
    await c.hSet(`${prefix}h`, { a: "1", b: "2" });
    const h = await c.hGetAll(`${prefix}h`);
    assert.deepEqual({ ...h }, { a: "1", b: "2" });
  }
  await c.quit();
  return `${pkg} ${require(`${pkg}/package.json`).version}`;
}

(async () => {
  for (const run of [ioredis, () => nodeRedis("redis4", "nr4:"), () => nodeRedis("redis6", "nr6:")]) {
    console.log(`${await run()} ok`);
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
