//! Requests that name no key, through a proxy over built-in nodes, against
//! one redis-server: key counts Redis refuses (`LMPOP 0 …`, `SINTERCARD`,
//! `ZINTERCARD`, `ZMPOP`, `BLMPOP`, `BZMPOP`, their negative and
//! non-numeric forms), count overflows (`HRANDFIELD … WITHVALUES`) and
//! shapes with a wrong arity (`SMOVE`, `RPOPLPUSH`) get Redis's reply byte
//! for byte in RESP2 and RESP3; keyless scripts (`EVAL … 0`, `FCALL f 0`)
//! run, each always on the same node.

mod common;

use common::compare::Compare;
use common::{Cluster, Raw};

const CASES: &[&str] = &[
    "LMPOP 0 a LEFT",
    "LMPOP -1 a LEFT",
    "LMPOP abc a LEFT",
    "LMPOP 2 a LEFT",
    "LMPOP 1 a MIDDLE",
    "LMPOP 1 a LEFT COUNT 0",
    "ZMPOP 0 a MIN",
    "ZMPOP -3 a MIN",
    "ZMPOP 1 a MIDDLE",
    "SINTERCARD 0 a",
    "SINTERCARD -1 a",
    "SINTERCARD abc a",
    "SINTERCARD 2 a",
    "SINTERCARD 1 a LIMIT",
    "SINTERCARD 1 a LIMIT -1",
    "SINTERCARD 1 a FOO 1",
    "ZINTERCARD 0 a",
    "ZINTERCARD -1 a",
    "ZINTERCARD 2 a",
    "ZINTERCARD 1 a LIMIT -1",
    "ZUNION 0 a",
    "ZINTER 0 a",
    "ZDIFF 0 a",
    "ZUNIONSTORE d 0 a",
    "BLMPOP 0 0 a LEFT",
    "BLMPOP 0 -1 a LEFT",
    "BLMPOP 0 abc a LEFT",
    "BLMPOP abc 0 a LEFT",
    "BLMPOP -1 0 a LEFT",
    "BLMPOP 0 2 a LEFT",
    "BZMPOP 0 0 a MIN",
    "BZMPOP 0 -5 a MIN",
    "BZMPOP 0 abc a MIN",
    "BZMPOP -1 1 a MIN",
    "HSET h f v",
    "HRANDFIELD h -9223372036854775808",
    "HRANDFIELD h -9223372036854775807 WITHVALUES",
    "HRANDFIELD h 9223372036854775807 WITHVALUES",
    "HRANDFIELD h 4611686018427387904 WITHVALUES",
    "HRANDFIELD h 4611686018427387903 WITHVALUES",
    "HRANDFIELD h 1 WITHVALUE",
    "HRANDFIELD nohash 9223372036854775807 WITHVALUES",
    "SRANDMEMBER s -9223372036854775808",
    "ZRANDMEMBER z -9223372036854775808 WITHSCORES",
    "ZADD z 1 m",
    "ZRANDMEMBER z -9223372036854775807 WITHSCORES",
    "ZRANDMEMBER z 4611686018427387904 WITHSCORES",
    "ZRANDMEMBER noz 9223372036854775807 WITHSCORES",
    "ZRANDMEMBER z 4611686018427387904 WITHSCORE",
    "SMOVE a b",
    "SMOVE a b c d",
    "RPOPLPUSH a",
    "RPOPLPUSH a b c",
    "EVAL|return 1|0",
    "EVAL|return {ARGV[1], ARGV[2]}|0|x|y",
    "EVAL|return 1|-1",
    "EVAL|return 1|1",
    "EVALSHA|abc|0",
    "EVALSHA|e0e1f9fabfc9d4800c877a703b823ac0578ff8db|0",
    "EVAL_RO|return 2|0",
    "FCALL|nofn|0",
    "FCALL_RO|nofn|0",
];

#[test]
fn keyless_shapes_through_the_proxy_answer_as_redis_server() {
    if !common::have_tool("redis-server") {
        return;
    }
    let cluster = Cluster::builtin(3);
    let redis = common::start_redis(common::free_port());
    for proto in ["2", "3"] {
        let mut c = Compare::open(cluster.proxy.port, redis.port, proto);
        c.both(&["DEL", "h", "z"]);
        for step in CASES {
            c.line(&format!("RESP{proto}"), step);
        }
        c.finish(&format!("keyless shapes, RESP{proto}"));
    }
    cluster.proxy.assert_no_panic();
    for n in &cluster.nodes {
        n.assert_no_panic();
    }
}

#[test]
fn a_keyless_script_runs_on_one_node_chosen_by_its_body() {
    let cluster = Cluster::builtin(3);
    let mut p = Raw::connect(cluster.proxy.port);
    // Which node ran it: each node's INFO `tcp_port`, read by the script.
    let lib = "#!lua name=where\nredis.register_function('where', function() return 1 end)";
    p.check(&["FUNCTION", "LOAD", lib], "$5\r\nwhere\r\n");
    let mut seen = std::collections::HashSet::new();
    for i in 0..20 {
        let script =
            format!("return {{{i}, string.match(redis.call('info', 'server'), 'tcp_port:(%d+)')}}");
        let first = p.call(&["EVAL", &script, "0"]);
        assert!(first.starts_with("*2\r\n"), "{first}");
        for _ in 0..3 {
            assert_eq!(
                p.call(&["EVAL", &script, "0"]),
                first,
                "moved between calls"
            );
        }
        seen.insert(first.lines().last().unwrap().to_string());
        p.check(&["FCALL", "where", "0"], ":1\r\n");
    }
    // Twenty scripts, three nodes: spread by body, not all on one.
    assert!(seen.len() > 1, "every keyless script went to one node");
}
