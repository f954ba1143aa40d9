//! The nodes' counts of the commands their scripts ran, added to the
//! proxy's INFO `commandstats`, `errorstats` and `total_error_replies`.
//!
//! The proxy sees an EVAL or FCALL, never the `redis.call`s inside it: the
//! built-in node counts those apart and shows them in its INFO
//! `shardis_scriptstats` section (`backend::scripting::stats`), which
//! `commands::info` asks of every node with the other sections it sums. A
//! node that does not answer the section (redis-server) adds nothing.
//!
//! Redis counts an error once: when the script's reply is the error a call
//! inside it raised, the error was counted at the call and the reply is not
//! counted again. The proxy counted that reply as any other error reply, so
//! the node also reports such replies (`script_reraised_…`) and they are
//! taken back out here.

use std::collections::BTreeMap;

/// One command's counters, as a commandstats line gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    calls: u64,
    usec: u64,
    rejected: u64,
    failed: u64,
}

impl Counts {
    /// Reads `calls=…,usec=…,usec_per_call=…,rejected_calls=…,failed_calls=…`.
    fn parse(v: &str) -> Counts {
        let get = |name: &str| {
            v.split(',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
                .unwrap_or(0)
        };
        Counts {
            calls: get("calls"),
            usec: get("usec"),
            rejected: get("rejected_calls"),
            failed: get("failed_calls"),
        }
    }

    fn add(&mut self, o: Counts) {
        self.calls += o.calls;
        self.usec += o.usec;
        self.rejected += o.rejected;
        self.failed += o.failed;
    }

    fn line(&self) -> String {
        let per = if self.calls == 0 {
            0.0
        } else {
            self.usec as f64 / self.calls as f64
        };
        format!(
            "calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}",
            self.calls, self.usec, self.rejected, self.failed
        )
    }
}

/// The script-side counts of every node that answered, summed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ScriptSums {
    /// By command name (lower case, as `cmdstat_` shows it).
    commands: BTreeMap<String, Counts>,
    /// Errors the calls replied, by code.
    errors: BTreeMap<String, u64>,
    total: u64,
    /// Script replies that were an error counted already, by code.
    reraised: BTreeMap<String, u64>,
    reraised_total: u64,
}

impl ScriptSums {
    /// Adds one node's INFO text (its `script_…` lines; none: nothing).
    pub(crate) fn add(&mut self, text: &str) {
        for line in text.split("\r\n") {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let count = || {
                v.strip_prefix("count=")
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            if let Some(name) = k.strip_prefix("script_cmdstat_") {
                self.commands
                    .entry(name.to_string())
                    .or_default()
                    .add(Counts::parse(v));
            } else if let Some(code) = k.strip_prefix("script_errorstat_") {
                *self.errors.entry(code.to_string()).or_default() += count();
            } else if let Some(code) = k.strip_prefix("script_reraised_errorstat_") {
                *self.reraised.entry(code.to_string()).or_default() += count();
            } else if k == "script_total_error_replies" {
                self.total += v.parse().unwrap_or(0);
            } else if k == "script_reraised_error_replies" {
                self.reraised_total += v.parse().unwrap_or(0);
            }
        }
    }

    /// INFO `total_error_replies` from the proxy's own count.
    pub(crate) fn total_errors(&self, proxy: u64) -> u64 {
        (proxy + self.total).saturating_sub(self.reraised_total)
    }

    /// The proxy's `cmdstat_…` lines with the scripts' calls added; commands
    /// only scripts called come last, by name.
    pub(crate) fn command_lines(&self, proxy: Vec<(String, String)>) -> Vec<(String, String)> {
        if self.commands.is_empty() {
            return proxy;
        }
        let mut rest = self.commands.clone();
        let mut out: Vec<(String, String)> = proxy
            .into_iter()
            .map(
                |(k, v)| match k.strip_prefix("cmdstat_").and_then(|n| rest.remove(n)) {
                    Some(s) => {
                        let mut c = Counts::parse(&v);
                        c.add(s);
                        (k, c.line())
                    }
                    None => (k, v),
                },
            )
            .collect();
        out.extend(
            rest.into_iter()
                .map(|(name, c)| (format!("cmdstat_{name}"), c.line())),
        );
        out
    }

    /// The proxy's `errorstat_…` lines with the scripts' errors added and
    /// the re-raised ones taken out, by code.
    pub(crate) fn error_lines(&self, proxy: Vec<(String, String)>) -> Vec<(String, String)> {
        if self.errors.is_empty() && self.reraised.is_empty() {
            return proxy;
        }
        let mut codes: BTreeMap<String, u64> = BTreeMap::new();
        for (k, v) in &proxy {
            if let Some(code) = k.strip_prefix("errorstat_") {
                let n = v.strip_prefix("count=").and_then(|n| n.parse().ok());
                *codes.entry(code.to_string()).or_default() += n.unwrap_or(0);
            }
        }
        for (code, n) in &self.errors {
            *codes.entry(code.clone()).or_default() += n;
        }
        for (code, n) in &self.reraised {
            if let Some(c) = codes.get_mut(code) {
                *c = c.saturating_sub(*n);
            }
        }
        codes
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .take(crate::proxy::ops::callstats::MAX_ERROR_CODES)
            .map(|(code, n)| (format!("errorstat_{code}"), format!("count={n}")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = "# Shardis_scriptstats\r\nscript_cmdstat_set:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0\r\nscript_cmdstat_get:calls=2,usec=4,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\nscript_errorstat_OOM:count=1\r\nscript_reraised_errorstat_OOM:count=1\r\nscript_total_error_replies:1\r\nscript_reraised_error_replies:1\r\n";

    #[test]
    fn an_error_a_script_reraised_is_counted_once() {
        let mut s = ScriptSums::default();
        s.add(NODE);
        s.add("# Memory\r\nused_memory:1\r\n");
        // The proxy counted the EVAL's -OOM reply.
        assert_eq!(s.total_errors(1), 1);
        let proxy = vec![("errorstat_OOM".to_string(), "count=1".to_string())];
        assert_eq!(
            s.error_lines(proxy),
            vec![("errorstat_OOM".to_string(), "count=1".to_string())]
        );
        let proxy = vec![(
            "cmdstat_get".to_string(),
            "calls=1,usec=10,usec_per_call=10.00,rejected_calls=0,failed_calls=0".to_string(),
        )];
        assert_eq!(
            s.command_lines(proxy),
            vec![
                (
                    "cmdstat_get".to_string(),
                    "calls=3,usec=14,usec_per_call=4.67,rejected_calls=0,failed_calls=0"
                        .to_string()
                ),
                (
                    "cmdstat_set".to_string(),
                    "calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0".to_string()
                ),
            ]
        );
    }

    #[test]
    fn a_node_without_the_section_adds_nothing() {
        let mut s = ScriptSums::default();
        s.add("# Stats\r\ntotal_error_replies:7\r\n");
        assert_eq!(s, ScriptSums::default());
        assert_eq!(s.total_errors(2), 2);
    }
}
