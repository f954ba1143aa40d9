"""redis-py's scan_iter through the proxy, unchanged: every key, both protocols.

Usage: python3 tests/clients/redis_py_scan.py PORT PREFIX N
The keys PREFIX0 .. PREFIX{N-1} must exist; exits non-zero if a walk misses one.
"""
import sys

import redis

port, prefix, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
want = {f"{prefix}{i}".encode() for i in range(n)}
for protocol in (2, 3):
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, socket_timeout=10)
    for kwargs in ({}, {"match": prefix + "*"}, {"count": 1000}, {"match": prefix + "*", "count": 7, "_type": "STRING"}):
        got = set(r.scan_iter(**kwargs))
        lost = want - got
        assert not lost, (protocol, kwargs, len(lost), sorted(lost)[:5])
        if "match" in kwargs:
            assert got == want, (protocol, kwargs, sorted(got - want)[:5])
    r.close()
print("redis-py", redis.__version__, "scan_iter ok")
