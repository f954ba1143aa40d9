//! What a Redis Cluster client sees: the proxy as one master node that owns
//! all 16384 slots, so a cluster-mode client (redis-py `RedisCluster`,
//! ioredis `Cluster`, node-redis `createCluster`) sends every request to the
//! proxy, which routes it on its own ring.
//!
//! Answers `CLUSTER SLOTS`, `SHARDS`, `NODES`, `INFO`, `MYID`, `MYSHARDID`,
//! `KEYSLOT` and `HELP`; called by `admin::handle` before its own subcommands. The
//! node announced is the address the client connected to (so a client that
//! reached the proxy through 127.0.0.1:7000 is told 127.0.0.1:7000). Never
//! describes the ring: that is `CLUSTER RING` / `RINGINFO` (admin.rs).

use bytes::{Bytes, BytesMut};
use md5::{Digest, Md5};

use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::resp::encode;

/// Slots in Redis Cluster's key space.
pub(crate) const SLOTS: u16 = 16384;

/// The announced node's id: 40 hex digits, stable for an address (derived
/// from it), as Redis Cluster's node ids are.
pub(crate) fn node_id(addr: &str) -> String {
    let a = Md5::digest(format!("shardis node {addr}").as_bytes());
    let b = Md5::digest(format!("shardis shard {addr}").as_bytes());
    let mut id = String::with_capacity(40);
    for byte in a.iter().chain(b.iter()).take(20) {
        id.push_str(&format!("{byte:02x}"));
    }
    id
}

/// `ip` and `port` of the address the client connected to.
fn announced(s: &ClientState) -> (String, u16) {
    match s.local.parse::<std::net::SocketAddr>() {
        Ok(a) => (a.ip().to_string(), a.port()),
        Err(_) => ("127.0.0.1".to_string(), 0),
    }
}

/// `CLUSTER HELP`, in Redis's layout: every subcommand the proxy answers
/// (here and in admin.rs).
const HELP: &[&str] = &[
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ADDNODE <host:port> [WEIGHT <w>] [NAME <name>] [REPLICAS <a,b>]",
    "    Add a node: copies its keys to it, then routes them there.",
    "SPAWNNODE [WEIGHT <w>] [NAME <name>]",
    "    Under `shardis up`: start a new built-in node and add it.",
    "REMOVENODE <name-or-addr>",
    "    Move a node's keys to the others, then drop it from the ring.",
    "PLAN ADDNODE|REMOVENODE ...",
    "    Dry run of a change: keys and bytes to move, estimated duration.",
    "ADDREPLICA <shard> <host:port>",
    "    Make the node a replica of the shard's primary.",
    "REMOVEREPLICA <shard> <host:port>",
    "    Stop using the node as a replica of the shard.",
    "FAILOVER <shard> [FORCE]",
    "    Planned switch to the shard's replica: pause, catch up, swap (FORCE: no catch-up).",
    "RING",
    "    One line per node of the ring.",
    "RINGINFO",
    "    The ring and the change in progress, as key:value lines.",
    "KEYNODE <key>",
    "    The name of the node that owns <key>.",
    "HOTKEYS [<count>]",
    "    The hottest sampled keys with their estimated requests.",
    "SLOTS | SHARDS | NODES | INFO | MYID | MYSHARDID",
    "    The proxy as one Redis Cluster node that owns every slot.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "HELP",
    "    Print this help.",
];

/// Answers the cluster-mode `CLUSTER` subcommands; `None` for the others.
pub(crate) fn handle(s: &ClientState, sub: &str, args: &[Bytes]) -> Option<Pending> {
    let (ip, port) = announced(s);
    let addr = format!("{ip}:{port}");
    let id = node_id(&addr);
    let proto = s.proto;
    let mut out = BytesMut::new();
    match (sub, args.len()) {
        ("slots", 2) => {
            encode::array_len(&mut out, 1);
            encode::array_len(&mut out, 3);
            encode::integer(&mut out, 0);
            encode::integer(&mut out, SLOTS as i64 - 1);
            // Redis 7: ip, port, id, and a map of extra networking metadata.
            encode::array_len(&mut out, 4);
            encode::bulk(&mut out, ip.as_bytes());
            encode::integer(&mut out, port as i64);
            encode::bulk(&mut out, id.as_bytes());
            encode::map_len(&mut out, 0, proto);
        }
        ("shards", 2) => {
            encode::array_len(&mut out, 1);
            encode::map_len(&mut out, 2, proto);
            encode::bulk(&mut out, b"slots");
            encode::array_len(&mut out, 2);
            encode::integer(&mut out, 0);
            encode::integer(&mut out, SLOTS as i64 - 1);
            encode::bulk(&mut out, b"nodes");
            encode::array_len(&mut out, 1);
            encode::map_len(&mut out, 7, proto);
            encode::bulk(&mut out, b"id");
            encode::bulk(&mut out, id.as_bytes());
            encode::bulk(&mut out, b"port");
            encode::integer(&mut out, port as i64);
            encode::bulk(&mut out, b"ip");
            encode::bulk(&mut out, ip.as_bytes());
            encode::bulk(&mut out, b"endpoint");
            encode::bulk(&mut out, ip.as_bytes());
            encode::bulk(&mut out, b"role");
            encode::bulk(&mut out, b"master");
            encode::bulk(&mut out, b"replication-offset");
            encode::integer(&mut out, 0);
            encode::bulk(&mut out, b"health");
            encode::bulk(&mut out, b"online");
        }
        ("nodes", 2) => {
            let line = format!(
                "{id} {addr}@{} myself,master - 0 0 1 connected 0-{}\n",
                port as u32 + 10000,
                SLOTS - 1
            );
            encode::verbatim(&mut out, line.as_bytes(), proto);
        }
        ("info", 2) => {
            let text = format!(
                "cluster_enabled:1\r\ncluster_state:ok\r\ncluster_slots_assigned:{SLOTS}\r\ncluster_slots_ok:{SLOTS}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:1\r\ncluster_size:1\r\ncluster_current_epoch:1\r\ncluster_my_epoch:1\r\ncluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n"
            );
            encode::verbatim(&mut out, text.as_bytes(), proto);
        }
        ("myid", 2) | ("myshardid", 2) => encode::bulk(&mut out, id.as_bytes()),
        ("keyslot", 3) => encode::integer(&mut out, key_slot(&args[2]) as i64),
        ("help", 2) => {
            encode::array_len(&mut out, HELP.len());
            HELP.iter().for_each(|l| encode::simple(&mut out, l));
        }
        ("slots" | "shards" | "nodes" | "info" | "myid" | "myshardid" | "keyslot" | "help", _) => {
            return Some(Pending::error(&format!(
                "ERR wrong number of arguments for 'cluster|{sub}' command"
            )))
        }
        _ => return None,
    }
    Some(Pending::ready(out))
}

/// Redis Cluster's slot of a key (CRC16/XMODEM of the key or its hash tag,
/// mod 16384), for `CLUSTER KEYSLOT`: clients compare it with their own.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let tagged = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(tagged) % SLOTS
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slots_match_redis_cluster() {
        // Values from Redis Cluster's specification and `CLUSTER KEYSLOT`.
        assert_eq!(key_slot(b"123456789"), 0x31C3 % SLOTS);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(key_slot(b"{}x"), crc16(b"{}x") % SLOTS);
    }

    #[test]
    fn node_ids_are_40_hex_digits_and_stable() {
        let id = node_id("127.0.0.1:7000");
        assert_eq!(id.len(), 40);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(id, node_id("127.0.0.1:7000"));
        assert_ne!(id, node_id("127.0.0.1:7100"));
    }
}
