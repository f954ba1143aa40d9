// ioredis Cluster and node-redis createCluster (4 and 6) against the proxy:
// each discovers one node owning every slot (the proxy) and sends SET/GET,
// hash-tagged MGET and pipelines there. Run by tests/cluster_clients.rs:
// node cluster.js PORT KEYS
"use strict";
const assert = require("assert");
const Redis = require("ioredis");
const port = Number(process.argv[2]);
const n = Number(process.argv[3]);
const root = [{ host: "127.0.0.1", port }];

async function ioredis() {
  const c = new Redis.Cluster(root, { enableReadyCheck: true });
  for (let i = 0; i < n; i++) await c.set(`io:${i}`, String(i));
  for (let i = 0; i < n; i++) assert.strictEqual(await c.get(`io:${i}`), String(i));
  const keys = [...Array(20).keys()].map((i) => `{io7}:${i}`);
  for (const k of keys) await c.set(k, k);
  assert.deepStrictEqual(await c.mget(keys), keys);
  const p = c.pipeline();
  for (let i = 0; i < n; i++) p.incr(`{io}:cnt`);
  const res = await p.exec();
  assert.strictEqual(res.length, n);
  assert.strictEqual(await c.get("{io}:cnt"), String(n));
  assert.strictEqual(c.nodes("master").length, 1);
  await c.quit();
  console.log(`ioredis ${require("ioredis/package.json").version} Cluster ok`);
}

async function nodeRedis(lib) {
  const { createCluster } = require(lib);
  const c = createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${port}` }] });
  c.on("error", (e) => console.error(lib, e));
  await c.connect();
  for (let i = 0; i < n; i++) await c.set(`${lib}:${i}`, String(i));
  for (let i = 0; i < n; i++) assert.strictEqual(await c.get(`${lib}:${i}`), String(i));
  const keys = [...Array(20).keys()].map((i) => `{${lib}}:${i}`);
  await c.mSet(keys.map((k) => [k, k]));
  assert.deepStrictEqual(await c.mGet(keys), keys);
  const replies = await Promise.all([...Array(n).keys()].map(() => c.incr(`{${lib}}:cnt`)));
  assert.strictEqual(replies.length, n);
  assert.strictEqual(await c.get(`{${lib}}:cnt`), String(n));
  assert.strictEqual(c.masters.length, 1);
  await c.quit();
  console.log(`${lib} ${require(lib + "/package.json").version} createCluster ok`);
}

(async () => {
  await ioredis();
  await nodeRedis("redis4");
  await nodeRedis("redis6");
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
