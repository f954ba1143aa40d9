"""redis-py against the proxy, unchanged: both protocols, pipelines, multi-key commands.

Usage: python3 tests/clients/redis_py.py PORT   (exits non-zero on any failure)
"""
import sys

import redis

port = int(sys.argv[1])
for protocol in (2, 3):
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, socket_timeout=10)
    assert r.ping()
    prefix = f"py{protocol}:"
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
    r.close()
print("redis-py", redis.__version__, "ok")
