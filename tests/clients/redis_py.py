"""redis-py against the proxy, unchanged: both protocols, pipelines, multi-key commands.

Usage: python3 tests/clients/redis_py.py PORT [KEYS] [--types]   (exits non-zero on any failure)
KEYS (default 0): keys written and then walked with scan_iter, every one must come back.
--types: also hashes and lists (when the nodes serve them).
"""
import sys

import redis

port = int(sys.argv[1])
nkeys = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 0
types = "--types" in sys.argv
for protocol in (2, 3):
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, socket_timeout=10)
    assert r.ping()
    prefix = f"py{redis.__version__.split('.')[0]}-{protocol}:"
    assert r.set(prefix + "user:42", '{"name":"ada"}')
    assert r.get(prefix + "user:42") == b'{"name":"ada"}'
    assert r.get(prefix + "missing") is None
    keys = [f"{prefix}k{i}" for i in range(50)]
    assert r.mset({k: k.upper() for k in keys})
    assert r.mget(keys + [prefix + "missing"]) == [k.upper().encode() for k in keys] + [None]
    assert r.incr(prefix + "ctr") == 1
    assert r.expire(prefix + "user:42", 100)
    assert 0 < r.ttl(prefix + "user:42") <= 100
    p = r.pipeline(transaction=False)
    for i in range(200):
        p.set(f"{prefix}p{i}", i)
        p.get(f"{prefix}p{i}")
    out = p.execute()
    assert out[1::2] == [str(i).encode() for i in range(200)], out[:6]
    assert r.delete(*keys) == 50
    info = r.info()
    assert info["redis_mode"] == "standalone" and info["role"] == "master", info
    assert r.client_setname("checker") and r.client_getname() in ("checker", b"checker")
    if nkeys:
        names = [f"{prefix}scan:{i}" for i in range(nkeys)]
        for i in range(0, nkeys, 1000):
            r.mset({k: "v" for k in names[i : i + 1000]})
        seen = set(r.scan_iter(match=prefix + "scan:*", count=500))
        missing = [k for k in names if k.encode() not in seen]
        assert not missing, f"scan_iter missed {len(missing)} keys, e.g. {missing[:3]}"
        seen = set(r.scan_iter(match=prefix + "scan:1*", count=37))
        assert seen == {k.encode() for k in names if k.startswith(prefix + "scan:1")}
    if types:
        assert r.hset(prefix + "h", mapping={"a": "1", "b": "2"}) == 2
        assert r.hgetall(prefix + "h") == {b"a": b"1", b"b": b"2"}
        assert r.rpush(prefix + "l", "x", "y") == 2
        assert r.lrange(prefix + "l", 0, -1) == [b"x", b"y"]
    r.close()
print("redis-py", redis.__version__, "ok")
