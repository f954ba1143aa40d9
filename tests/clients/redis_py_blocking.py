"""redis-py against the proxy, unchanged: blocking pops with timeouts, woken
by another client's push, in the protocol given.

Usage: redis_py_blocking.py PORT PROTO. Prints the library version, exits
non-zero on any mismatch.
"""

import sys
import threading
import time

import redis

port = int(sys.argv[1])
proto = int(sys.argv[2])
kw = {"protocol": proto} if proto == 3 else {}
r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10, **kw)
other = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10, **kw)

r.delete("q", "{z}s", "{m}src", "{m}dst")

# A timeout on an empty list answers None after about the timeout.
t0 = time.monotonic()
assert r.blpop(["q"], timeout=0.3) is None
waited = time.monotonic() - t0
assert 0.25 <= waited < 5, waited
assert r.bzpopmin("{z}s", timeout=0.2) is None
assert r.blmove("{m}src", "{m}dst", 0.2, "LEFT", "RIGHT") is None


# Another client's push wakes a pop blocked without a timeout.
def push_later(key, *vals):
    time.sleep(0.3)
    other.rpush(key, *vals)


th = threading.Thread(target=push_later, args=("q", "a"))
th.start()
assert r.blpop(["q"], timeout=0) in ([b"q", b"a"], (b"q", b"a"))
th.join()

th = threading.Thread(target=lambda: (time.sleep(0.3), other.zadd("{z}s", {"m": 2})))
th.start()
got = r.bzpopmin("{z}s", timeout=5)
assert tuple(got) == (b"{z}s", b"m", 2.0), got
th.join()

th = threading.Thread(target=push_later, args=("{m}src", "x"))
th.start()
assert r.blmove("{m}src", "{m}dst", 5, "LEFT", "RIGHT") == b"x"
th.join()
assert r.lrange("{m}dst", 0, -1) == [b"x"]

# Data already there: answered at once.
other.rpush("q", "b", "c")
assert r.brpop(["q"], timeout=1) in ([b"q", b"c"], (b"q", b"c"))
assert r.blpop(["q"], timeout=1) in ([b"q", b"b"], (b"q", b"b"))

print(f"redis-py {redis.__version__} protocol {proto}: blocking ok")
