"""redis-py's PubSub against the proxy, unchanged: channels and patterns,
get_message and listen(), in the given protocols.

Usage: python3 tests/clients/pubsub_py.py PORT PROTO...   (exits non-zero on any failure)
"""
import sys
import threading
import time

import redis

port = int(sys.argv[1])
for protocol in [int(p) for p in sys.argv[2:]]:
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, socket_timeout=10)
    p = r.pubsub()
    p.subscribe("news", "sport")
    p.psubscribe("ne*")
    confirmations = []
    deadline = time.time() + 10
    while len(confirmations) < 3 and time.time() < deadline:
        m = p.get_message(timeout=1)
        if m:
            confirmations.append((m["type"], m["channel"], m["data"]))
    assert confirmations == [
        ("subscribe", b"news", 1),
        ("subscribe", b"sport", 2),
        ("psubscribe", b"ne*", 3),
    ], confirmations
    assert r.publish("news", "hello") == 2
    assert r.publish("sport", "goal") == 1
    assert r.publish("weather", "rain") == 0
    got = []
    deadline = time.time() + 10
    while len(got) < 3 and time.time() < deadline:
        m = p.get_message(timeout=1)
        if m:
            got.append((m["type"], m["pattern"], m["channel"], m["data"]))
    want = {
        ("message", None, b"news", b"hello"),
        ("pmessage", b"ne*", b"news", b"hello"),
        ("message", None, b"sport", b"goal"),
    }
    assert set(got) == want and len(got) == 3, got
    assert r.pubsub_numsub("news", "sport") == [(b"news", 1), (b"sport", 1)]
    assert r.pubsub_numpat() == 1
    assert set(r.pubsub_channels()) >= {b"news", b"sport"}
    # listen(): a thread publishes once the loop is waiting.
    threading.Timer(0.3, lambda: r.publish("sport", "final")).start()
    for m in p.listen():
        if m["type"] == "message":
            assert (m["channel"], m["data"]) == (b"sport", b"final"), m
            break
    p.unsubscribe()
    p.punsubscribe()
    deadline = time.time() + 10
    left = 3
    while left and time.time() < deadline:
        m = p.get_message(timeout=1)
        if m and m["type"] in ("unsubscribe", "punsubscribe"):
            left -= 1
    assert left == 0, "unsubscribe confirmations missing"
    assert r.pubsub_numsub("news") == [(b"news", 0)]
    p.close()
    assert r.ping() and r.set("after", "1") and r.get("after") == b"1"
    r.close()
print("redis-py", redis.__version__, "pubsub ok")
