// node-redis 6 subscribing through the proxy, unchanged: channels and
// patterns, in RESP2 and RESP3, while the same client's other connection
// publishes.
//
// Usage: node tests/clients/node/pubsub.js PORT
// Exits non-zero on the first failure; prints one line.
"use strict";

const assert = require("node:assert/strict");

const port = Number(process.argv[2]);

// Resolves once `cond()` holds, or fails after 10 s.
async function until(what, cond) {
  const deadline = Date.now() + 10000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`${what} never happened`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function run(RESP) {
  const { createClient } = require("redis6");
  const url = `redis://127.0.0.1:${port}`;
  const pub = createClient({ url, RESP });
  pub.on("error", (e) => console.error("pub", e));
  await pub.connect();
  const sub = pub.duplicate();
  sub.on("error", (e) => console.error("sub", e));
  await sub.connect();
  const got = [];
  await sub.subscribe("news", (msg, ch) => got.push(`${ch}:${msg}`));
  await sub.pSubscribe("ne*", (msg, ch) => got.push(`p:${ch}:${msg}`));
  assert.equal(await pub.publish("news", "hello"), 2);
  assert.equal(await pub.publish("nets", "x"), 1);
  await until("messages", () => got.length === 3);
  assert.deepEqual(got.sort(), ["news:hello", "p:nets:x", "p:news:hello"]);
  assert.deepEqual(await pub.pubSubNumSub(["news"]), { news: 1 });
  await sub.unsubscribe("news");
  await sub.pUnsubscribe("ne*");
  assert.equal(await pub.publish("news", "late"), 0);
  // Out of subscribe mode: ordinary commands again.
  assert.equal(String(await sub.set(`ps:${RESP}`, "v")), "OK");
  assert.equal(String(await sub.get(`ps:${RESP}`)), "v");
  await sub.quit();
  await pub.quit();
  return require("redis6/package.json").version;
}

(async () => {
  const v = await run(2);
  await run(3);
  console.log(`redis6 ${v} pubsub ok (RESP2, RESP3)`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
