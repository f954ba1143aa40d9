//! What each command needs: the four permission classes a user can be
//! given (`commands = "read" | "readwrite" | "all" | "admin"`) and the
//! class each request falls in. Pure: a function of the command's catalogue
//! row and its arguments.
//!
//! `admin` is the only class that may change the cluster or the proxy as a
//! whole (every CLUSTER change, FLUSHALL, FLUSHDB, CONFIG SET, SHUTDOWN,
//! CLIENT KILL, MONITOR, ACL LIST); `all` is every other command; `readwrite`
//! the data commands; `read` those that only read.

use bytes::Bytes;

use crate::catalogue::{Command, Id, READONLY, WRITE};
use crate::resp::eq_ignore_case;

/// A user's permission class; each includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Perm {
    Read,
    ReadWrite,
    All,
    Admin,
}

impl std::str::FromStr for Perm {
    type Err = ();
    fn from_str(s: &str) -> Result<Perm, ()> {
        match s {
            "read" => Ok(Perm::Read),
            "readwrite" => Ok(Perm::ReadWrite),
            "all" => Ok(Perm::All),
            "admin" => Ok(Perm::Admin),
            _ => Err(()),
        }
    }
}

impl Perm {
    /// The rules ACL LIST prints for this class, in Redis's notation.
    pub(crate) fn acl_rules(self) -> &'static str {
        match self {
            Perm::Read => "-@all +@read +@connection +@transaction",
            Perm::ReadWrite => "-@all +@read +@write +@connection +@transaction +@pubsub",
            Perm::All => "+@all -@admin",
            Perm::Admin => "+@all",
        }
    }
}

/// Container commands whose refusals name the subcommand (`'cluster|addnode'`).
const CONTAINERS: &[Id] = &[
    Id::Cluster,
    Id::Config,
    Id::Client,
    Id::Acl,
    Id::Slowlog,
    Id::Memory,
    Id::Object,
    Id::Pubsub,
    Id::Function,
    Id::Command,
];

/// CLUSTER subcommands that only read: everything else changes the cluster.
const CLUSTER_VIEWS: &[&str] = &[
    "info",
    "slots",
    "shards",
    "nodes",
    "myid",
    "keyslot",
    "countkeysinslot",
    "getkeysinslot",
    "keynode",
    "ring",
    "ringinfo",
    "plan",
    "hotkeys",
    "proxies",
    "links",
    "help",
];

/// The class `cmd` with `args` needs (the least that may run it).
pub(crate) fn needs(cmd: &Command, args: &[Bytes]) -> Perm {
    let sub = args.get(1).map(|a| a.as_ref()).unwrap_or(b"");
    let is = |s: &str| eq_ignore_case(sub, s.as_bytes());
    match cmd.id {
        Id::Flushall | Id::Flushdb | Id::Shutdown | Id::Monitor | Id::Debug => Perm::Admin,
        Id::Cluster if CLUSTER_VIEWS.iter().any(|v| is(v)) => Perm::Read,
        Id::Cluster => Perm::Admin,
        Id::Config if is("get") || is("help") => Perm::All,
        Id::Config => Perm::Admin,
        Id::Client if is("kill") || is("pause") || is("unpause") => Perm::Admin,
        Id::Acl if is("list") || is("users") || is("getuser") || is("log") => Perm::Admin,
        Id::Slowlog if is("reset") => Perm::Admin,
        Id::Ping
        | Id::Echo
        | Id::Quit
        | Id::Hello
        | Id::Auth
        | Id::Select
        | Id::Client
        | Id::Command
        | Id::Reset
        | Id::Acl
        | Id::Multi
        | Id::Exec
        | Id::Discard
        | Id::Watch
        | Id::Unwatch
        | Id::Info
        | Id::Time
        | Id::Readonly
        | Id::Readwrite
        | Id::Asking
        | Id::Subscribe
        | Id::Unsubscribe
        | Id::Psubscribe
        | Id::Punsubscribe
        | Id::Ssubscribe
        | Id::Sunsubscribe
        | Id::Pubsub => Perm::Read,
        Id::Publish | Id::Spublish => Perm::ReadWrite,
        _ if cmd.flags & WRITE != 0 => Perm::ReadWrite,
        _ if cmd.flags & READONLY != 0 => Perm::Read,
        _ => Perm::All,
    }
}

/// The name a refusal gives: `get`, or `cluster|addnode` for a container's
/// subcommand, lower-case as Redis prints it.
pub(crate) fn refused_name(cmd: &Command, args: &[Bytes]) -> String {
    match args.get(1) {
        Some(sub) if CONTAINERS.contains(&cmd.id) => format!(
            "{}|{}",
            cmd.name,
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        ),
        _ => cmd.name.to_string(),
    }
}

/// The channel arguments `cmd` names, when it is a pub/sub command that
/// names channels (checked against the user's channel patterns).
pub(crate) fn channels<'a>(cmd: &Command, args: &'a [Bytes]) -> Option<&'a [Bytes]> {
    match cmd.id {
        Id::Subscribe | Id::Psubscribe | Id::Ssubscribe => Some(&args[1..]),
        Id::Publish | Id::Spublish if args.len() > 1 => Some(&args[1..2]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::TABLE;

    fn need(args: &[&str]) -> Perm {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.to_string())).collect();
        let cmd = TABLE
            .iter()
            .find(|c| eq_ignore_case(&args[0], c.name.as_bytes()))
            .unwrap();
        needs(cmd, &args)
    }

    #[test]
    fn each_request_falls_in_one_class() {
        let cases: &[(&[&str], Perm)] = &[
            (&["GET", "k"], Perm::Read),
            (&["MGET", "a", "b"], Perm::Read),
            (&["SET", "k", "v"], Perm::ReadWrite),
            (&["DEL", "k"], Perm::ReadWrite),
            (&["PUBLISH", "c", "m"], Perm::ReadWrite),
            (&["SUBSCRIBE", "c"], Perm::Read),
            (&["PING"], Perm::Read),
            (&["CLUSTER", "SLOTS"], Perm::Read),
            (&["cluster", "ringinfo"], Perm::Read),
            (&["CLUSTER", "ADDNODE", "h:1"], Perm::Admin),
            (&["CLUSTER", "REMOVENODE", "n"], Perm::Admin),
            (&["CLUSTER", "SPAWNNODE"], Perm::Admin),
            (&["FLUSHALL"], Perm::Admin),
            (&["FLUSHDB"], Perm::Admin),
            (&["CONFIG", "SET", "a", "b"], Perm::Admin),
            (&["CONFIG", "GET", "*"], Perm::All),
            (&["SHUTDOWN"], Perm::Admin),
            (&["CLIENT", "KILL", "ID", "1"], Perm::Admin),
            (&["CLIENT", "LIST"], Perm::Read),
            (&["MONITOR"], Perm::Admin),
            (&["ACL", "LIST"], Perm::Admin),
            (&["ACL", "WHOAMI"], Perm::Read),
            (&["FUNCTION", "LIST"], Perm::All),
        ];
        for (args, want) in cases {
            assert_eq!(need(args), *want, "{args:?}");
        }
    }

    #[test]
    fn refusals_name_the_subcommand_of_a_container() {
        let cluster = TABLE.iter().find(|c| c.id == Id::Cluster).unwrap();
        let get = TABLE.iter().find(|c| c.id == Id::Get).unwrap();
        let a =
            |v: &[&str]| -> Vec<Bytes> { v.iter().map(|s| Bytes::from(s.to_string())).collect() };
        assert_eq!(
            refused_name(cluster, &a(&["CLUSTER", "AddNode"])),
            "cluster|addnode"
        );
        assert_eq!(refused_name(get, &a(&["GET", "k"])), "get");
    }
}
