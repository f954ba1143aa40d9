"""redis-py against the proxy, unchanged: MULTI/EXEC pipelines and WATCH.

Usage: redis_py_tx.py PORT. Prints the library version, exits non-zero on
any mismatch.
"""

import sys

import redis

port = int(sys.argv[1])
r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)
other = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)

# pipeline(transaction=True): MULTI … EXEC, the replies as a list.
r.delete("{tx}a", "{tx}b")
p = r.pipeline(transaction=True)
p.set("{tx}a", 10).incrby("{tx}a", 5).rpush("{tx}b", "x", "y").lrange("{tx}b", 0, -1)
assert p.execute() == [True, 15, 2, [b"x", b"y"]]

# A command that fails inside EXEC is reported in its place.
p = r.pipeline(transaction=True)
p.set("{tx}s", "v").incr("{tx}b").get("{tx}s")
res = p.execute(raise_on_error=False)
assert res[0] is True and isinstance(res[1], redis.ResponseError) and res[2] == b"v", res

# WATCH: another client's write makes EXEC fail with WatchError.
with r.pipeline() as p:
    p.watch("{tx}a")
    assert int(p.get("{tx}a")) == 15
    other.set("{tx}a", 100)
    p.multi()
    p.set("{tx}a", 16)
    try:
        p.execute()
        raise SystemExit("EXEC ran although a watched key changed")
    except redis.WatchError:
        pass
assert r.get("{tx}a") == b"100"

# The usual check-and-set loop, via Redis.transaction().
def double(pipe):
    v = int(pipe.get("{tx}a"))
    pipe.multi()
    pipe.set("{tx}a", v * 2)

r.transaction(double, "{tx}a")
assert r.get("{tx}a") == b"200"

print("redis-py", redis.__version__, "transactions ok")
