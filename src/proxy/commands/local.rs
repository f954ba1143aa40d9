//! Commands the proxy answers itself: connection handshake (HELLO, AUTH,
//! CLIENT, SELECT), introspection (COMMAND, TIME) and PING,
//! ECHO, QUIT. Replies follow redis-server 7 so that client libraries'
//! handshakes succeed unchanged.
//!
//! Called by `dispatch`. INFO and MEMORY live in `info.rs`, CONFIG
//! in `config_cmd.rs`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};

use crate::catalogue::Id;
use crate::catalogue::KeySpec;
use crate::proxy::commands::common::{help, REDIS_COMPAT_VERSION};
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::policy::TABLE;
use crate::proxy::policy::{lookup, CommandSpec, Kind};
use crate::proxy::Proxy;
use crate::resp::{encode, eq_ignore_case, parse_i64, Request};

pub(crate) async fn handle(
    proxy: &Arc<Proxy>,
    s: &mut ClientState,
    spec: &'static CommandSpec,
    req: Request,
) -> Pending {
    if spec.id == Id::Memory {
        return crate::proxy::commands::memory::memory(proxy, s, req).await;
    }
    if spec.id == Id::Ping && req.args.len() <= 2 {
        if let Some(p) = ping_running_script(proxy, s, &req).await {
            return p;
        }
    }
    let args = &req.args;
    let mut out = BytesMut::new();
    match spec.id {
        Id::Ping => match args.len() {
            1 => encode::simple(&mut out, "PONG"),
            2 => encode::bulk(&mut out, &args[1]),
            _ => {
                return Pending::error("ERR wrong number of arguments for 'ping' command");
            }
        },
        Id::Echo => encode::bulk(&mut out, &args[1]),
        Id::Quit => {
            encode::simple(&mut out, "OK");
            return Pending::Close(out.freeze());
        }
        Id::Hello => return hello(s, args),
        Id::Auth => {
            if args.len() == 2 {
                return Pending::error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
            }
            if args.len() != 3 {
                return Pending::error("ERR syntax error");
            }
            // Without users, only Redis's passwordless `default` user exists.
            if !eq_ignore_case(&args[1], b"default") {
                return Pending::error(
                    "WRONGPASS invalid username-password pair or user is disabled.",
                );
            }
            encode::simple(&mut out, "OK");
        }
        Id::Select => match parse_i64(&args[1]) {
            Some(0) => encode::simple(&mut out, "OK"),
            Some(_) => {
                return Pending::error(
                    "ERR DB index is out of range (shardis serves database 0 only)",
                );
            }
            None => return Pending::error("ERR value is not an integer or out of range"),
        },
        Id::Client => return client(proxy, s, args),
        Id::Acl => return crate::proxy::conn::auth::acl::handle(&proxy.auth, s, args),
        Id::Monitor => {
            s.monitor = true;
            encode::simple(&mut out, "OK");
        }
        Id::Command => return command(s, args),
        Id::Info => return crate::proxy::commands::info::info(proxy, s, args).await,
        Id::Config => return crate::proxy::commands::config::config(proxy, s, args).await,
        Id::Slowlog => return Pending::Ready(proxy.ops.slowlog.command(args)),
        Id::Time => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            encode::array_len(&mut out, 2);
            encode::bulk(&mut out, now.as_secs().to_string().as_bytes());
            encode::bulk(&mut out, now.subsec_micros().to_string().as_bytes());
        }
        // Cluster-mode clients send these to every node; the proxy routes
        // reads and writes itself, so they change nothing.
        Id::Readonly | Id::Readwrite | Id::Asking => encode::simple(&mut out, "OK"),
        Id::Reset => {
            s.tx.clear();
            s.pubsub.reset();
            s.proto = 2;
            s.name = None;
            s.reply = crate::proxy::commands::clients::ReplyMode::On;
            s.monitor = false;
            crate::proxy::commands::clients::publish_identity(s);
            encode::simple(&mut out, "RESET");
        }
        _ => {
            return Pending::error(&format!("ERR unhandled local command '{}'", spec.name));
        }
    }
    Pending::ready(out)
}

fn hello(s: &mut ClientState, args: &[Bytes]) -> Pending {
    let mut proto = s.proto;
    let mut name = None;
    let mut i = 1;
    if args.len() > 1 {
        match parse_i64(&args[1]) {
            Some(v @ 2..=3) => proto = v as u8,
            Some(_) => return Pending::error("NOPROTO unsupported protocol version"),
            None => {
                return Pending::error("ERR Protocol version is not an integer or out of range");
            }
        }
        i = 2;
    }
    while i < args.len() {
        let more = args.len() - i - 1;
        if eq_ignore_case(&args[i], b"AUTH") && more >= 2 {
            i += 3;
        } else if eq_ignore_case(&args[i], b"SETNAME") && more >= 1 {
            if !is_valid_client_name(&args[i + 1]) {
                return Pending::error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            name = Some(args[i + 1].clone());
            i += 2;
        } else {
            return Pending::error(&format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[i])
            ));
        }
    }
    s.proto = proto;
    if name.is_some() {
        s.name = name;
    }
    crate::proxy::commands::clients::publish_identity(s);
    let mut out = BytesMut::new();
    encode::map_len(&mut out, 7, proto);
    encode::bulk(&mut out, b"server");
    encode::bulk(&mut out, b"redis");
    encode::bulk(&mut out, b"version");
    encode::bulk(&mut out, REDIS_COMPAT_VERSION.as_bytes());
    encode::bulk(&mut out, b"proto");
    encode::integer(&mut out, proto as i64);
    encode::bulk(&mut out, b"id");
    encode::integer(&mut out, s.id as i64);
    encode::bulk(&mut out, b"mode");
    encode::bulk(&mut out, b"standalone");
    encode::bulk(&mut out, b"role");
    encode::bulk(&mut out, b"master");
    encode::bulk(&mut out, b"modules");
    encode::array_len(&mut out, 0);
    Pending::ready(out)
}

fn is_valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

fn client(proxy: &Proxy, s: &mut ClientState, args: &[Bytes]) -> Pending {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let mut out = BytesMut::new();
    match (sub.as_str(), args.len()) {
        ("setname", 3) => {
            if !is_valid_client_name(&args[2]) {
                return Pending::error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            s.name = if args[2].is_empty() {
                None
            } else {
                Some(args[2].clone())
            };
            crate::proxy::commands::clients::publish_identity(s);
            encode::simple(&mut out, "OK");
        }
        ("getname", 2) => match &s.name {
            Some(n) => encode::bulk(&mut out, n),
            None => encode::null(&mut out, s.proto),
        },
        ("id", 2) => encode::integer(&mut out, s.id as i64),
        ("setinfo", 4) => {
            let attr = String::from_utf8_lossy(&args[2]).to_ascii_lowercase();
            if attr != "lib-name" && attr != "lib-ver" {
                return Pending::error(&format!(
                    "ERR Unrecognized option '{}'",
                    String::from_utf8_lossy(&args[2])
                ));
            }
            encode::simple(&mut out, "OK");
        }
        ("list", _) | ("info", 2) => return crate::proxy::commands::clients::list(proxy, s, args),
        ("kill", n) if n >= 3 => return crate::proxy::commands::clients::kill(proxy, s, args),
        ("reply", 3) => return crate::proxy::commands::clients::reply(s, &args[2]),
        ("unblock", 3 | 4) => return crate::proxy::commands::clients::unblock(proxy, args),
        ("help", 2) => help(&mut out, "CLIENT", CLIENT_HELP),
        ("no-evict" | "no-touch", 3) => {
            if !eq_ignore_case(&args[2], b"on") && !eq_ignore_case(&args[2], b"off") {
                return Pending::error("ERR syntax error");
            }
            encode::simple(&mut out, "OK")
        }
        (
            "setname" | "getname" | "id" | "setinfo" | "info" | "no-evict" | "no-touch" | "help"
            | "kill" | "reply" | "unblock",
            _,
        ) => {
            return Pending::error(&format!(
                "ERR wrong number of arguments for 'client|{sub}' command"
            ));
        }
        _ => {
            return Pending::error(&format!(
                "ERR unknown subcommand '{}'. Try CLIENT HELP.",
                String::from_utf8_lossy(&args[1])
            ));
        }
    }
    Pending::ready(out)
}

const CLIENT_HELP: &[&str] = &[
    "GETNAME",
    "ID",
    "INFO",
    "KILL <ip:port>",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Options: ID <id>, ADDR <ip:port>, LADDR <ip:port>, TYPE (NORMAL|PUBSUB), USER <username>, SKIPME (YES|NO), MAXAGE <seconds>",
    "LIST [TYPE <type>] [ID <id> [<id> ...]]",
    "NO-EVICT (ON|OFF)",
    "NO-TOUCH (ON|OFF)",
    "REPLY (ON|OFF|SKIP)",
    "SETINFO <LIB-NAME|LIB-VER> <value>",
    "SETNAME <name>",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "HELP",
];

const COMMAND_HELP: &[&str] = &[
    "(no subcommand)",
    "COUNT",
    "DOCS [<command-name> ...]",
    "GETKEYS <full-command>",
    "INFO [<command-name> ...]",
    "LIST",
    "HELP",
];

fn command_entry(out: &mut BytesMut, spec: &CommandSpec) {
    // Only what the proxy routes by key reports key positions: a shard
    // channel is not routed as a key, a refused command not at all.
    let routed_by_key = !matches!(spec.kind, Kind::PubSub(_) | Kind::Refused(_));
    let (first, last, step) = match spec.keys {
        _ if !routed_by_key => (0, 0, 0),
        KeySpec::None => (0, 0, 0),
        KeySpec::Range { first, last, step } => (first as i64, last as i64, step as i64),
        KeySpec::NumKeys { .. } => (0, 0, 0),
        KeySpec::Keyword(_) => (1, 1, 1),
    };
    encode::array_len(out, 10);
    encode::bulk(out, spec.name.as_bytes());
    encode::integer(out, spec.arity as i64);
    // A refused command never writes through the proxy.
    let writes = spec.is_write() && !matches!(spec.kind, Kind::Refused(_));
    let mut flags = vec![if writes { "write" } else { "readonly" }];
    if matches!(spec.kind, Kind::Refused(_)) {
        flags.push("noscript");
    }
    encode::array_len(out, flags.len());
    for f in flags {
        out.extend_from_slice(format!("+{f}\r\n").as_bytes());
    }
    encode::integer(out, first);
    encode::integer(out, last);
    encode::integer(out, step);
    for _ in 0..4 {
        encode::array_len(out, 0);
    }
}

fn command(s: &ClientState, args: &[Bytes]) -> Pending {
    let mut out = BytesMut::new();
    if args.len() == 1 {
        encode::array_len(&mut out, TABLE.len());
        for spec in TABLE {
            command_entry(&mut out, spec);
        }
        return Pending::ready(out);
    }
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match (sub.as_str(), args.len()) {
        ("count", 2) => encode::integer(&mut out, TABLE.len() as i64),
        ("help", 2) => help(&mut out, "COMMAND", COMMAND_HELP),
        ("count" | "help", _) => {
            return Pending::error(&format!(
                "ERR wrong number of arguments for 'command|{sub}' command"
            ))
        }
        // FILTERBY is not supported: nothing else may follow LIST.
        ("list", n) if n > 2 => return Pending::error("ERR syntax error"),
        ("info", _) => {
            let names: Vec<&Bytes> = args[2..].iter().collect();
            if names.is_empty() {
                encode::array_len(&mut out, TABLE.len());
                for spec in TABLE {
                    command_entry(&mut out, spec);
                }
            } else {
                encode::array_len(&mut out, names.len());
                for n in names {
                    match lookup(n) {
                        Some(spec) => command_entry(&mut out, spec),
                        None => encode::null_array(&mut out, s.proto),
                    }
                }
            }
        }
        ("getkeys", n) if n < 4 => {
            return Pending::error("ERR wrong number of arguments for 'command|getkeys' command")
        }
        ("getkeys", _) => return getkeys(&args[2..]),
        // redis-cli asks for docs to show hints; none is a valid answer.
        ("docs", _) => encode::map_len(&mut out, 0, s.proto),
        ("list", _) => {
            encode::array_len(&mut out, TABLE.len());
            for spec in TABLE {
                encode::bulk(&mut out, spec.name.as_bytes());
            }
        }
        _ => {
            return Pending::error(&format!(
                "ERR unknown subcommand '{}'. Try COMMAND HELP.",
                String::from_utf8_lossy(&args[1])
            ));
        }
    }
    Pending::ready(out)
}

/// COMMAND GETKEYS command arg…: the keys the proxy routes `command` by,
/// with Redis's errors.
fn getkeys(call: &[Bytes]) -> Pending {
    let Some(spec) = lookup(&call[0]) else {
        return Pending::error("ERR Invalid command specified");
    };
    if !spec.is_arity_ok(call.len()) {
        return Pending::error("ERR Invalid number of arguments specified for command");
    }
    // Redis's `no-mandatory-keys` commands answer no keys instead.
    let optional = matches!(
        spec.id,
        Id::Eval | Id::Evalsha | Id::EvalRo | Id::EvalshaRo | Id::Fcall | Id::FcallRo
    );
    let keys = match spec.key_positions(call) {
        Ok(k) if !k.is_empty() => k,
        _ if optional => Vec::new(),
        Ok(_) => return Pending::error("ERR The command has no key arguments"),
        Err(_) => return Pending::error("ERR Invalid arguments specified for command"),
    };
    let mut out = BytesMut::new();
    encode::array_len(&mut out, keys.len());
    for k in keys {
        encode::bulk(&mut out, &call[k]);
    }
    Pending::ready(out)
}

/// PING while a node runs a script is asked of that node (on the client's
/// script lane, if it is on that node's: behind its own script), which
/// answers `-BUSY` past `busy-reply-threshold`, as redis-server answers
/// PING while its one thread runs a script. Otherwise the proxy answers.
async fn ping_running_script(
    proxy: &Arc<Proxy>,
    s: &ClientState,
    req: &Request,
) -> Option<Pending> {
    let node = {
        let routing = proxy.routing.load();
        let n = routing.primaries().find(|n| n.scripts.is_running())?;
        n.clone()
    };
    Some(Pending::One(
        s.upstream_to(&node).send(req.raw.clone()).await,
    ))
}
