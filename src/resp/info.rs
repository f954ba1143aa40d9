//! The text of an INFO reply, as Redis 7 lays it out: which sections a
//! request selects (`INFO`, `INFO <section> …`, `all`, `everything`,
//! `default`), each section as `# Title\r\n` then `field:value\r\n` lines,
//! sections separated by one blank line, the whole ending with CRLF; and
//! reading a field back out of such a text.
//!
//! Shared by the built-in node (its own INFO) and the proxy (its INFO, which
//! sums the nodes' fields). Text only, no sockets, no state; the one read
//! from outside is this process's own counters in `/proc` ([`Usage`]).

use std::fmt::Write as _;

/// Every section, in Redis's order: (request name, title).
pub(crate) const SECTIONS: &[(&str, &str)] = &[
    ("server", "Server"),
    ("clients", "Clients"),
    ("memory", "Memory"),
    ("persistence", "Persistence"),
    ("stats", "Stats"),
    ("replication", "Replication"),
    ("cpu", "CPU"),
    ("modules", "Modules"),
    ("commandstats", "Commandstats"),
    ("errorstats", "Errorstats"),
    ("latencystats", "Latencystats"),
    ("cluster", "Cluster"),
    ("keyspace", "Keyspace"),
];

/// Sections of a plain `INFO` (and `INFO default`): all but the per-command ones.
const NOT_DEFAULT: &[&str] = &["commandstats", "latencystats"];

/// The sections one INFO request asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Selection(u16);

impl Selection {
    /// Reads INFO's arguments (after the command name). No argument means
    /// `default`; names are case-insensitive; unknown names select nothing,
    /// so `INFO nosuch` is an empty reply, as in Redis.
    pub(crate) fn parse<A: AsRef<[u8]>>(args: &[A]) -> Selection {
        let mut bits = 0u16;
        let default = || {
            SECTIONS
                .iter()
                .enumerate()
                .filter(|(_, (n, _))| !NOT_DEFAULT.contains(n))
                .fold(0u16, |b, (i, _)| b | 1 << i)
        };
        if args.is_empty() {
            return Selection(default());
        }
        for a in args {
            let a = a.as_ref();
            if a.eq_ignore_ascii_case(b"all") || a.eq_ignore_ascii_case(b"everything") {
                bits |= (1 << SECTIONS.len()) - 1;
            } else if a.eq_ignore_ascii_case(b"default") {
                bits |= default();
            } else if let Some(i) = SECTIONS
                .iter()
                .position(|(n, _)| a.eq_ignore_ascii_case(n.as_bytes()))
            {
                bits |= 1 << i;
            }
        }
        Selection(bits)
    }

    /// Whether section `name` (a request name such as `"memory"`) is selected.
    pub(crate) fn has(&self, name: &str) -> bool {
        SECTIONS
            .iter()
            .position(|(n, _)| *n == name)
            .is_some_and(|i| self.0 & 1 << i != 0)
    }

    /// Whether any of `names` is selected.
    pub(crate) fn has_any(&self, names: &[&str]) -> bool {
        names.iter().any(|n| self.has(n))
    }
}

/// The `commandstats` and `errorstats` lines (`field`, `value`) of one
/// INFO reply.
#[derive(Debug, Default)]
pub(crate) struct CallLines {
    pub(crate) commands: Vec<(String, String)>,
    pub(crate) errors: Vec<(String, String)>,
}

/// Builds an INFO text section by section.
#[derive(Debug, Default)]
pub(crate) struct InfoText {
    text: String,
}

impl InfoText {
    /// Appends a section: `# Title`, then one `field:value` line per pair.
    /// Sections must be appended in [`SECTIONS`] order.
    pub(crate) fn section<V: std::fmt::Display>(&mut self, name: &str, fields: &[(&str, V)]) {
        let title = SECTIONS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(name, |(_, t)| t);
        if !self.text.is_empty() {
            self.text.push_str("\r\n");
        }
        let _ = write!(self.text, "# {title}\r\n");
        for (k, v) in fields {
            let _ = write!(self.text, "{k}:{v}\r\n");
        }
    }

    /// Appends more `field:value` lines to the section appended last.
    pub(crate) fn more<V: std::fmt::Display>(&mut self, fields: &[(&str, V)]) {
        for (k, v) in fields {
            let _ = write!(self.text, "{k}:{v}\r\n");
        }
    }

    /// The CPU section from this process's `usage`, then modules (none),
    /// `commandstats` and `errorstats` from `calls` (`cmdstat_…` and
    /// `errorstat_…` lines; empty where they are not kept) and latencystats
    /// (not kept) — the same for the proxy and the node.
    pub(crate) fn cpu_and_stats(&mut self, want: &Selection, usage: &Usage, calls: &CallLines) {
        if want.has("cpu") {
            self.section(
                "cpu",
                &[
                    ("used_cpu_sys", format!("{:.6}", usage.cpu_sys_secs)),
                    ("used_cpu_user", format!("{:.6}", usage.cpu_user_secs)),
                    ("used_cpu_sys_children", "0.000000".into()),
                    ("used_cpu_user_children", "0.000000".into()),
                ],
            );
        }
        if want.has("modules") {
            self.section::<u8>("modules", &[]);
        }
        for (name, lines) in [
            ("commandstats", &calls.commands),
            ("errorstats", &calls.errors),
        ] {
            if want.has(name) {
                let fields: Vec<(&str, &str)> = lines
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                self.section(name, &fields);
            }
        }
        if want.has("latencystats") {
            self.section::<u8>("latencystats", &[]);
        }
    }

    /// The finished text (empty when no section was selected).
    pub(crate) fn finish(self) -> String {
        self.text
    }
}

/// The value of `field` in an INFO text, if present.
pub(crate) fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.split("\r\n").find_map(|line| {
        line.strip_prefix(name)?
            .strip_prefix(':')
            .map(|v| v.trim_end_matches('\n'))
    })
}

/// An integer field, 0 when absent or not a number.
pub(crate) fn field_u64(text: &str, name: &str) -> u64 {
    field(text, name).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// `db0:keys=N,expires=M` of an INFO keyspace section: (keys, expires).
pub(crate) fn keyspace(text: &str) -> (u64, u64) {
    let Some(line) = field(text, "db0") else {
        return (0, 0);
    };
    let get = |name: &str| {
        line.split(',')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
            .unwrap_or(0)
    };
    (get("keys"), get("expires"))
}

/// Redis's `bytesToHuman`: `1023B`, `1.72M`, `100.00M`.
pub(crate) fn human(n: u64) -> String {
    let f = n as f64;
    match n {
        n if n < 1024 => format!("{n}B"),
        n if n < 1 << 20 => format!("{:.2}K", f / 1024.0),
        n if n < 1 << 30 => format!("{:.2}M", f / (1u64 << 20) as f64),
        n if n < 1 << 40 => format!("{:.2}G", f / (1u64 << 30) as f64),
        _ => format!("{:.2}T", f / (1u64 << 40) as f64),
    }
}

/// This process's resident memory and CPU time, for INFO's Memory and CPU
/// sections; zeros where `/proc` is unavailable.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Usage {
    pub rss_bytes: u64,
    pub cpu_user_secs: f64,
    pub cpu_sys_secs: f64,
}

impl Usage {
    /// Reads `/proc/self/statm` and `/proc/self/stat`.
    pub(crate) fn now() -> Usage {
        let rss_bytes = std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map_or(0, |pages| pages * 4096);
        // Fields 14 and 15 (utime, stime) in clock ticks, which /proc always
        // reports at USER_HZ = 100; the command name (field 2) may hold
        // spaces, so count from the closing parenthesis.
        let ticks = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| {
                let rest = &s[s.rfind(')')? + 1..];
                let f: Vec<&str> = rest.split_whitespace().collect();
                Some((
                    f.get(11)?.parse::<u64>().ok()?,
                    f.get(12)?.parse::<u64>().ok()?,
                ))
            })
            .unwrap_or((0, 0));
        Usage {
            rss_bytes,
            cpu_user_secs: ticks.0 as f64 / 100.0,
            cpu_sys_secs: ticks.1 as f64 / 100.0,
        }
    }
}

/// `instantaneous_ops_per_sec`: commands per second between two INFO
/// calls at least [`OpsMeter::MIN_WINDOW_MS`] apart (a tool polling INFO
/// every second, as `redis-cli --stat` does, sees the last second's rate).
#[derive(Debug)]
pub struct OpsMeter {
    /// (when, commands then, rate measured then). A std mutex: held for a
    /// few arithmetic operations, never across `.await`.
    last: std::sync::Mutex<(std::time::Instant, u64, u64)>,
}

impl Default for OpsMeter {
    fn default() -> Self {
        OpsMeter {
            last: std::sync::Mutex::new((std::time::Instant::now(), 0, 0)),
        }
    }
}

impl OpsMeter {
    /// Shorter windows keep the previous rate: too few commands to measure.
    pub(crate) const MIN_WINDOW_MS: u128 = 100;

    /// The rate given the command counter's value now.
    pub(crate) fn rate(&self, commands: u64) -> u64 {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = last.0.elapsed();
        if elapsed.as_millis() >= Self::MIN_WINDOW_MS {
            let done = commands.saturating_sub(last.1);
            let rate = (done as f64 / elapsed.as_secs_f64()).round() as u64;
            *last = (std::time::Instant::now(), commands, rate);
        }
        last.2
    }
}

/// The INFO server fields both roles give alike (the process, not the
/// role): what follows the version lines in `# Server`.
pub(crate) fn process_fields() -> [(&'static str, String); 8] {
    [
        ("redis_git_sha1", "00000000".into()),
        ("redis_git_dirty", "0".into()),
        ("redis_mode", "standalone".into()),
        (
            "os",
            format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        ),
        ("arch_bits", "64".into()),
        ("multiplexing_api", "epoll".into()),
        ("process_id", std::process::id().to_string()),
        ("process_supervised", "no".into()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: Selection) -> Vec<&'static str> {
        SECTIONS
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| s.has(n))
            .collect()
    }

    #[test]
    fn selections_follow_redis() {
        let default = names(Selection::parse::<&[u8]>(&[]));
        assert_eq!(default.len(), SECTIONS.len() - 2);
        assert!(!default.contains(&"commandstats"));
        assert_eq!(names(Selection::parse(&["DEFAULT"])), default);
        assert_eq!(names(Selection::parse(&["all"])).len(), SECTIONS.len());
        assert_eq!(
            names(Selection::parse(&["everything"])).len(),
            SECTIONS.len()
        );
        assert_eq!(
            names(Selection::parse(&["keyspace", "Memory"])),
            ["memory", "keyspace"]
        );
        assert!(names(Selection::parse(&["nosuch"])).is_empty());
    }

    #[test]
    fn text_is_laid_out_as_redis() {
        let mut t = InfoText::default();
        t.section("cpu", &[("used_cpu_sys", "0.1")]);
        t.section::<&str>("modules", &[]);
        t.section("cluster", &[("cluster_enabled", 0)]);
        assert_eq!(
            t.finish(),
            "# CPU\r\nused_cpu_sys:0.1\r\n\r\n# Modules\r\n\r\n# Cluster\r\ncluster_enabled:0\r\n"
        );
        assert_eq!(InfoText::default().finish(), "");
    }

    #[test]
    fn fields_are_read_back() {
        let t = "# Memory\r\nused_memory:100\r\nused_memory_human:100B\r\n\r\n# Keyspace\r\ndb0:keys=12,expires=3,avg_ttl=0\r\n";
        assert_eq!(field(t, "used_memory"), Some("100"));
        assert_eq!(field_u64(t, "used_memory_human"), 0);
        assert_eq!(field_u64(t, "nosuch"), 0);
        assert_eq!(keyspace(t), (12, 3));
        assert_eq!(keyspace("# Keyspace\r\n"), (0, 0));
    }

    #[test]
    fn own_usage_is_read() {
        let u = Usage::now();
        assert!(u.rss_bytes > 0);
        assert!(u.cpu_user_secs >= 0.0 && u.cpu_sys_secs >= 0.0);
    }

    #[test]
    fn human_sizes_match_bytes_to_human() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(1023), "1023B");
        assert_eq!(human(1805984), "1.72M");
        assert_eq!(human(104_857_600), "100.00M");
    }
}
