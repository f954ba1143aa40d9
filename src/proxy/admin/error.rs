//! Why a topology change requested by `CLUSTER ADDNODE`, `SPAWNNODE`,
//! `REMOVENODE` or `PLAN` was refused, and the one place that renders each as
//! its `-ERR …` line. Used by `admin` and `plan`; never talks to a node.

use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::proxy::admin::migration::MigrationError;
use crate::resp::encode;
use crate::ring::RingError;

#[derive(Debug)]
pub(crate) enum AdminError {
    /// The node address is not `ip:port`.
    BadAddress(String),
    /// An option without its value.
    MissingValue,
    /// `WEIGHT` outside 1..=1000 or not an integer.
    BadWeight,
    /// `NAME` empty or with spaces.
    BadName,
    /// An option that is neither `WEIGHT` nor `NAME`.
    SyntaxNear(String),
    /// The address is already a node of the ring.
    AddrPresent { addr: String, name: String },
    /// The name is already a node of the ring.
    NamePresent(String),
    /// Copies left by an earlier change on the node could not be deleted.
    StraysRemain(MigrationError),
    /// The node to add does not answer.
    Unreachable { addr: String, why: String },
    /// The node to add holds keys.
    NotEmpty { addr: String, keys: i64 },
    /// The node to add answered DBSIZE with something else than an integer.
    BadDbsize { addr: String, reply: String },
    /// `SPAWNNODE` outside `shardis up`.
    SpawnUnsupported,
    /// Starting the node process failed.
    Spawn(String),
    /// The admin lock stayed taken (a sweep retry, another change).
    LockBusy,
    /// A change is running.
    InProgress,
    /// A shard is failing over: the ring's members are about to change.
    FailingOver,
    /// `auto_eject_hosts` took these servers out of the ring for now.
    Ejected(String),
    /// No node of the ring has that name or address.
    NoSuchNode(String),
    /// Removing it would leave the ring empty.
    LastNode,
    /// `REMOVENODE` of an unreachable node waited too long for a change.
    WaitTimedOut,
    /// `CLUSTER PLAN` while a change runs.
    PlanInProgress,
    /// `CLUSTER PLAN` with neither of its forms.
    PlanUsage,
    /// A node answered `CLUSTER PLAN`'s SCAN with something else than a page.
    BadScanReply { node: String, reply: String },
    /// The next ring could not be built.
    Ring(RingError),
    /// The migration engine refused or failed the change.
    Migration(MigrationError),
    /// The fleet's shared store or leader did not complete the request.
    FleetChange(String),
    /// A joining node refused the ring's libraries or scripts.
    ScriptsRefused { addr: String, why: String },
}

impl fmt::Display for AdminError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdminError::BadAddress(addr) => {
                write!(f, "invalid node address '{addr}': expected ip:port")
            }
            AdminError::MissingValue => {
                f.write_str("syntax error: expected WEIGHT <w> or NAME <name>")
            }
            AdminError::BadWeight => f.write_str("WEIGHT must be an integer from 1 to 1000"),
            AdminError::BadName => f.write_str("NAME must be non-empty without spaces"),
            AdminError::SyntaxNear(arg) => write!(f, "syntax error near '{arg}'"),
            AdminError::AddrPresent { addr, name } => {
                write!(f, "node {addr} is already in the ring (as {name})")
            }
            AdminError::NamePresent(name) => {
                write!(f, "a node named {name} is already in the ring")
            }
            AdminError::StraysRemain(e) => write!(
                f,
                "{e}: it holds copies from an earlier change that could not be deleted; the ring is unchanged"
            ),
            AdminError::Unreachable { addr, why } => {
                write!(f, "cannot reach node {addr}: {why}; the ring is unchanged")
            }
            AdminError::NotEmpty { addr, keys } => write!(
                f,
                "node {addr} is not empty ({keys} keys); add an empty node so no stale key can shadow a live one"
            ),
            AdminError::BadDbsize { addr, reply } => {
                write!(f, "node {addr} answered DBSIZE with {reply:?}")
            }
            AdminError::SpawnUnsupported => f.write_str(
                "SPAWNNODE works under `shardis up` only; start a node yourself and use CLUSTER ADDNODE host:port",
            ),
            AdminError::Spawn(e) => f.write_str(e),
            AdminError::LockBusy => f.write_str("another topology change is being applied"),
            AdminError::Ejected(names) => write!(
                f,
                "server(s) {names} are ejected (auto_eject_hosts); change the topology once they are back"
            ),
            AdminError::InProgress => f.write_str(
                "a topology change is in progress; retry when CLUSTER RINGINFO shows state:ok",
            ),
            AdminError::FailingOver => f.write_str(
                "a shard is failing over; retry when CLUSTER RINGINFO shows its new primary",
            ),
            AdminError::NoSuchNode(which) => {
                write!(f, "no node named or at '{which}' in the ring")
            }
            AdminError::LastNode => f.write_str("cannot remove the last node"),
            AdminError::WaitTimedOut => {
                f.write_str("the running topology change did not end in time; retry")
            }
            AdminError::PlanInProgress => f.write_str(
                "a topology change is in progress; plan the next one when CLUSTER RINGINFO shows state:ok",
            ),
            AdminError::PlanUsage => f.write_str(
                "usage: CLUSTER PLAN ADDNODE host:port [WEIGHT w] [NAME n] | CLUSTER PLAN REMOVENODE name",
            ),
            AdminError::BadScanReply { node, reply } => {
                write!(f, "node {node}: unexpected SCAN reply {reply:?}")
            }
            AdminError::Ring(e) => write!(f, "{e}"),
            AdminError::Migration(e) => write!(f, "{e}"),
            AdminError::FleetChange(e) => f.write_str(e),
            AdminError::ScriptsRefused { addr, why } => write!(
                f,
                "node {addr} refused the scripts every node has ({why}); the ring is unchanged"
            ),
        }
    }
}

impl std::error::Error for AdminError {}

impl AdminError {
    /// The error as the reply a client reads: `-ERR ` and the text.
    pub(crate) fn reply(&self) -> Bytes {
        let mut out = BytesMut::new();
        encode::error(&mut out, &format!("ERR {self}"));
        out.freeze()
    }
}

impl From<MigrationError> for AdminError {
    fn from(e: MigrationError) -> Self {
        AdminError::Migration(e)
    }
}

impl From<RingError> for AdminError {
    fn from(e: RingError) -> Self {
        AdminError::Ring(e)
    }
}
