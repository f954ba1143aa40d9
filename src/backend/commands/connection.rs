//! Connection commands: PING, ECHO, QUIT, HELLO, SELECT, AUTH, RESET and
//! CLIENT. They touch only the calling connection's state.

use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::node::REDIS_VERSION;
use crate::resp::{encode, eq_ignore_case};
use bytes::Bytes;

/// PING [message]; a RESP2 connection in subscribe mode gets
/// `*2 pong <message or "">`, as from Redis.
pub(crate) fn ping(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if args.len() > 2 {
        return Err(CmdError::WrongArity("ping".into()));
    }
    if ctx.client.proto == 2 && ctx.client.is_subscribed() {
        encode::array_len(ctx.out, 2);
        encode::bulk(ctx.out, b"pong");
        encode::bulk(ctx.out, args.get(1).copied().unwrap_or(b""));
        return Ok(());
    }
    match args.len() {
        1 => encode::simple(ctx.out, "PONG"),
        _ => encode::bulk(ctx.out, args[1]),
    }
    Ok(())
}

/// ECHO message
pub(crate) fn echo(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    encode::bulk(ctx.out, args[1]);
    Ok(())
}

/// QUIT: `+OK`, then the connection closes once replies are flushed.
pub(crate) fn quit(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    ctx.ok();
    ctx.client.quit = true;
    Ok(())
}

/// SELECT index: only database 0 exists.
pub(crate) fn select(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    match parse_i64(args[1])? {
        0 => {
            ctx.ok();
            Ok(())
        }
        _ => Err(CmdError::DbIndexOutOfRange),
    }
}

/// Checks credentials. Without `--requirepass`, like Redis with the
/// `default` user on `nopass`, any password for `default` is accepted;
/// with it, only that password, for `default`. A success authenticates
/// the connection; a failure leaves it as it was.
fn check_auth(ctx: &mut Ctx, user: &[u8], pass: &[u8]) -> CmdResult {
    let ok = eq_ignore_case(user, b"default")
        && match ctx.node.requirepass {
            None => true,
            Some(want) => {
                let got = crate::backend::NodeConfig::password_digest_bytes(pass);
                got.iter()
                    .zip(want.iter())
                    .fold(0u8, |d, (a, b)| d | (a ^ b))
                    == 0
            }
        };
    if ok {
        ctx.client.authenticated = true;
        Ok(())
    } else {
        Err(CmdError::Other(
            "WRONGPASS invalid username-password pair or user is disabled.".into(),
        ))
    }
}

/// AUTH [username] password
pub(crate) fn auth(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    match args.len() {
        2 if ctx.node.requirepass.is_some() => {
            check_auth(ctx, b"default", args[1])?;
            ctx.ok();
            Ok(())
        }
        2 => Err(CmdError::err(
            "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        )),
        3 => {
            check_auth(ctx, args[1], args[2])?;
            ctx.ok();
            Ok(())
        }
        _ => Err(CmdError::Syntax),
    }
}

/// Whether a client name is acceptable (Redis: printable, no spaces).
fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

fn set_name(ctx: &mut Ctx, name: &[u8]) -> CmdResult {
    if !valid_name(name) {
        return Err(CmdError::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    ctx.client.name = (!name.is_empty()).then(|| Bytes::copy_from_slice(name));
    Ok(())
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]
pub(crate) fn hello(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut proto = None;
    if args.len() >= 2 {
        let v = parse_i64(args[1])
            .map_err(|_| CmdError::err("Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::NoProto);
        }
        proto = Some(v as u8);
    }
    let (mut user, mut name) = (None, None);
    let mut j = 2;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if eq_ignore_case(args[j], b"auth") && more >= 2 {
            user = Some((args[j + 1], args[j + 2]));
            j += 3;
        } else if eq_ignore_case(args[j], b"setname") && more >= 1 {
            name = Some(&args[j + 1]);
            j += 2;
        } else {
            return Err(CmdError::err(format!(
                "Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(args[j])
            )));
        }
    }
    match user {
        Some((user, pass)) => check_auth(ctx, user, pass)?,
        None if !ctx.client.authenticated => {
            return Err(CmdError::Other("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into()));
        }
        None => {}
    }
    if let Some(name) = name {
        set_name(ctx, name)?;
    }
    if let Some(p) = proto {
        ctx.client.proto = p;
        if let Some(sub) = &ctx.client.pubsub {
            sub.mailbox.set_proto(p);
        }
    }
    let proto = ctx.client.proto;
    let out = &mut *ctx.out;
    encode::map_len(out, 7, proto);
    for (k, v) in [("server", "redis"), ("version", REDIS_VERSION)] {
        encode::bulk(out, k.as_bytes());
        encode::bulk(out, v.as_bytes());
    }
    encode::bulk(out, b"proto");
    encode::integer(out, proto as i64);
    encode::bulk(out, b"id");
    encode::integer(out, ctx.client.id as i64);
    for (k, v) in [("mode", "standalone"), ("role", "master")] {
        encode::bulk(out, k.as_bytes());
        encode::bulk(out, v.as_bytes());
    }
    encode::bulk(out, b"modules");
    encode::array_len(out, 0);
    Ok(())
}

/// RESET: back to a fresh RESP2 connection, out of MULTI, watching
/// nothing, subscribed to nothing.
pub(crate) fn reset(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    ctx.client.tx.clear(ctx.node);
    ctx.client.proto = 2;
    ctx.client.name = None;
    ctx.client.pubsub = None;
    ctx.client.authenticated = ctx.node.requirepass.is_none();
    encode::simple(ctx.out, "RESET");
    Ok(())
}

/// The CLIENT INFO / CLIENT LIST line for this connection.
pub(crate) fn client_line(ctx: &Ctx) -> String {
    let c = &*ctx.client;
    let show = |b: &Option<Bytes>| {
        b.as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let (sub, psub, ssub) = c.pubsub.as_ref().map_or((0, 0, 0), |s| s.counts());
    let omem = c.pubsub.as_ref().map_or(0, |s| s.mailbox.pending());
    let flags = if c.is_subscribed() { "P" } else { "N" };
    format!(
        "id={} addr={} laddr={} fd=0 name={} age={} idle=0 flags={flags} db=0 sub={sub} psub={psub} ssub={ssub} multi=-1 \
         qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem={omem} tot-mem=0 events=r \
         cmd=client|{} user=default redir=-1 resp={} lib-name={} lib-ver={}\n",
        c.id,
        c.addr,
        c.laddr,
        show(&c.name),
        ctx.now.saturating_sub(c.since) / 1000,
        "info",
        c.proto,
        show(&c.lib.0),
        show(&c.lib.1),
    )
}

/// Writes a bulk string, or a verbatim `txt` string under RESP3 (as Redis
/// does for INFO and CLIENT INFO).
pub(crate) fn verbatim(ctx: &mut Ctx, text: &str) {
    encode::verbatim(ctx.out, text.as_bytes(), ctx.client.proto);
}

/// CLIENT SETNAME|GETNAME|ID|SETINFO|INFO|LIST|NO-EVICT|NO-TOUCH|HELP
pub(crate) fn client(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let sub = args[1].to_ascii_lowercase();
    let need = |ok: bool| match ok {
        true => Ok(()),
        false => Err(CmdError::WrongArity(format!(
            "client|{}",
            String::from_utf8_lossy(&sub)
        ))),
    };
    let n = args.len();
    match &sub[..] {
        b"setname" => {
            need(n == 3)?;
            set_name(ctx, args[2])?;
            ctx.ok();
        }
        b"getname" => {
            need(n == 2)?;
            let name = ctx.client.name.clone();
            ctx.bulk_or_null(name.as_deref());
        }
        b"id" => {
            need(n == 2)?;
            encode::integer(ctx.out, ctx.client.id as i64);
        }
        b"setinfo" => {
            need(n == 4)?;
            let value = Some(Bytes::copy_from_slice(args[3]));
            if eq_ignore_case(args[2], b"lib-name") {
                if !valid_name(args[3]) {
                    return Err(CmdError::err(
                        "lib-name cannot contain spaces, newlines or special characters.",
                    ));
                }
                ctx.client.lib.0 = value;
            } else if eq_ignore_case(args[2], b"lib-ver") {
                ctx.client.lib.1 = value;
            } else {
                return Err(CmdError::err(format!(
                    "Unrecognized option '{}'",
                    String::from_utf8_lossy(args[2])
                )));
            }
            ctx.ok();
        }
        b"info" => {
            need(n == 2)?;
            let line = client_line(ctx);
            verbatim(ctx, &line);
        }
        b"list" => {
            // Filters (TYPE t, ID id…) are not supported: like Redis on a
            // malformed filter, anything after LIST is a syntax error.
            if n != 2 {
                return Err(CmdError::Syntax);
            }
            let line = client_line(ctx);
            verbatim(ctx, &line);
        }
        b"unblock" => {
            need(n == 3 || n == 4)?;
            let id = parse_i64(args[2])?;
            let error = match args.get(3) {
                None => false,
                Some(r) if eq_ignore_case(r, b"timeout") => false,
                Some(r) if eq_ignore_case(r, b"error") => true,
                Some(_) => {
                    return Err(CmdError::err(
                        "CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
                    ))
                }
            };
            let node = ctx.node;
            let done = id >= 0 && node.blocking.unblock(&node.store.ready, id as u64, error);
            encode::integer(ctx.out, done as i64);
        }
        b"no-evict" | b"no-touch" => {
            need(n == 3)?;
            if !eq_ignore_case(args[2], b"on") && !eq_ignore_case(args[2], b"off") {
                return Err(CmdError::Syntax);
            }
            ctx.ok();
        }
        b"help" => {
            need(n == 2)?;
            let lines = [
                "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GETNAME",
                "ID",
                "INFO",
                "LIST",
                "SETINFO <option> <value>",
                "SETNAME <name>",
                "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                "HELP",
            ];
            ctx.help(&lines);
        }
        _ => {
            return Err(CmdError::UnknownSubcommand(
                String::from_utf8_lossy(args[1]).into_owned(),
                "CLIENT",
            ))
        }
    }
    Ok(())
}
