"""redis-py's RedisCluster against the proxy: it discovers one node owning
every slot (the proxy) and sends SET/GET/MGET, hash-tagged multi-key
commands and pipelines there. Run by tests/cluster_clients.rs:
python3 redis_py_cluster.py PORT KEYS"""
import sys

import redis
from redis.cluster import RedisCluster

port, n = int(sys.argv[1]), int(sys.argv[2])
rc = RedisCluster(host="127.0.0.1", port=port, socket_timeout=10)
nodes = rc.get_nodes()
assert len(nodes) == 1 and nodes[0].port == port, nodes
for i in range(n):
    assert rc.set(f"py:{i}", i)
for i in range(n):
    assert rc.get(f"py:{i}") == str(i).encode()
# Keys sharing a hash tag are one slot for the client and one node for the proxy.
keys = [f"{{user7}}:{i}" for i in range(20)]
rc.mset_nonatomic({k: k for k in keys})
assert rc.mget(keys) == [k.encode() for k in keys]
pipe = rc.pipeline()
for i in range(n):
    pipe.incr(f"py:cnt:{i % 50}")
assert len(pipe.execute()) == n
total = sum(int(rc.get(f"py:cnt:{i}")) for i in range(50))
assert total == n, total
info = rc.cluster_info()
assert info["cluster_state"] == "ok", info
assert rc.cluster_keyslot("foo") == 12182
print(f"redis-py {redis.__version__} RedisCluster ok over port {port}")
