//! The proxy's column of the command catalogue: for each command [`Id`],
//! how the proxy handles it — routed by key, split and merged, fanned out,
//! answered by the proxy, an admin command, pinned, pub/sub, or refused
//! with a reason. Name, arity, keys and flags come from the catalogue row
//! the id names ([`CommandSpec`] derefs to it).
//!
//! Read by `dispatch` for every request; the README's command list
//! is tested equal to [`markdown_table`].

use std::ops::Deref;

use crate::catalogue::{self, Command, Id};

mod table;

pub use table::TABLE;

/// How the proxy handles a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Routed to the node owning its key; several keys must share one node.
    Keyed,
    /// Split by owner node and merged in key order.
    Split(Merge),
    /// Sent to every node, replies aggregated.
    FanOut(Aggregate),
    /// Answered by the proxy itself.
    Local,
    /// Topology administration (`CLUSTER …`).
    Admin,
    /// Needs a dedicated upstream connection for a while (see
    /// `proxy::pinned`): transactions, blocking commands.
    Pinned(Pinned),
    /// Pub/sub (see `proxy::pubsub`).
    PubSub(PubSub),
    /// Known, but refused; the reason is part of the error.
    Refused(&'static str),
}

/// What a command pins a dedicated connection for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pinned {
    /// MULTI, EXEC, DISCARD, WATCH, UNWATCH.
    Transaction,
    /// BLPOP and the like: the connection is held while the command blocks.
    Blocking,
}

/// The pub/sub commands' three routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PubSub {
    /// (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE: on the client's subscriber
    /// connection to one node.
    Subscribe,
    /// PUBLISH, SPUBLISH: to every node, counts summed.
    Publish,
    /// PUBSUB …: to every node, lists and counts merged.
    Introspect,
}

/// How the fragments of a split command are merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// MGET: one array, values in the order the keys were asked.
    Values,
    /// MSET: `+OK` once every fragment said OK.
    AllOk,
    /// DEL, UNLINK, EXISTS, TOUCH: the sum of the fragments' integers.
    Sum,
}

/// How the replies of a fanned-out command are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregate {
    /// DBSIZE: sum of integers.
    Sum,
    /// FLUSHALL, FLUSHDB: `+OK` once every node said OK.
    AllOk,
    /// KEYS: concatenation of arrays.
    Concat,
    /// SCAN: a cursor that walks node after node.
    Scan,
    /// RANDOMKEY: the first non-nil reply from nodes tried in random order.
    AnyNonNil,
    /// SCRIPT …: the first node's reply, unless any node failed.
    First,
}

/// One row of the proxy's policy: a catalogue row and what the proxy does
/// with it.
#[derive(Clone, Copy, Debug)]
pub struct CommandSpec {
    pub id: Id,
    pub kind: Kind,
}

impl Deref for CommandSpec {
    type Target = Command;

    fn deref(&self) -> &Command {
        &catalogue::TABLE[self.id as usize]
    }
}

/// Finds a command's policy by name, case-insensitively, without allocating.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    catalogue::lookup(name).map(|c| &TABLE[c.id as usize])
}

/// The README's command table, generated from [`TABLE`] (a test keeps the
/// README equal to it).
pub fn markdown_table() -> String {
    let names = |pred: &dyn Fn(&CommandSpec) -> bool| {
        TABLE
            .iter()
            .filter(|s| pred(s))
            .map(|s| format!("`{}`", s.name))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut out = String::from("| how the proxy handles it | commands |\n|---|---|\n");
    out.push_str(&format!(
        "| routed to the key's node (several keys must share a node: use a `{{hash tag}}`) | {} |\n",
        names(&|s| s.kind == Kind::Keyed)
    ));
    out.push_str(&format!(
        "| split by node, merged in key order | {} |\n",
        names(&|s| matches!(s.kind, Kind::Split(_)))
    ));
    out.push_str(&format!(
        "| sent to every node, replies aggregated | {} |\n",
        names(&|s| matches!(s.kind, Kind::FanOut(_)))
    ));
    out.push_str(&format!(
        "| answered by the proxy | {} |\n",
        names(&|s| s.kind == Kind::Local)
    ));
    for (pin, what) in [
        (
            Pinned::Transaction,
            "transactions: every key on one node, run on a connection pinned to it (see below)",
        ),
        (
            Pinned::Blocking,
            "blocking: each blocked client holds its own pinned connection to the key's node",
        ),
    ] {
        let list = names(&|s| s.kind == Kind::Pinned(pin));
        out.push_str(&format!("| {what} | {list} |\n"));
    }
    for (kind, what) in [
        (
            PubSub::Subscribe,
            "pub/sub subscriptions: each subscriber holds one pinned connection to one node (see below)",
        ),
        (
            PubSub::Publish,
            "pub/sub publishing: sent to every node, receiver counts summed",
        ),
        (
            PubSub::Introspect,
            "pub/sub introspection: sent to every node, channel lists merged, subscriber counts summed",
        ),
    ] {
        let list = names(&|s| s.kind == Kind::PubSub(kind));
        out.push_str(&format!("| {what} | {list} |\n"));
    }
    out.push_str(&format!(
        "| topology administration | {} |\n",
        names(&|s| s.kind == Kind::Admin)
    ));
    let mut reasons: Vec<&str> = Vec::new();
    for spec in TABLE {
        if let Kind::Refused(why) = spec.kind {
            if !reasons.contains(&why) {
                reasons.push(why);
            }
        }
    }
    for why in reasons {
        out.push_str(&format!(
            "| refused: {why} | {} |\n",
            names(&|s| s.kind == Kind::Refused(why))
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_column_has_one_row_per_catalogue_row_in_its_order() {
        assert_eq!(TABLE.len(), catalogue::TABLE.len());
        for (i, (p, c)) in TABLE.iter().zip(catalogue::TABLE).enumerate() {
            assert_eq!(p.id as usize, i, "{}", c.name);
            assert_eq!(c.id as usize, i, "{}", c.name);
        }
    }
}
