//! What one connection counted, how connections are merged, and the two report
//! formats (a human line, one JSON object). No I/O beyond the final print.

use hdrhistogram::Histogram;
use std::time::{Duration, Instant};

/// Highest latency the histograms hold, in µs (60 s); longer ones saturate.
const MAX_LATENCY_US: u64 = 60_000_000;

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("static histogram bounds are valid")
}

/// Counters and histograms of one connection (later: of the whole run).
pub struct Stats {
    /// Reply time minus intended send time (open loop) or actual send time (closed loop), µs.
    pub latency: Histogram<u64>,
    /// Reply time minus actual send time, µs: what a closed-loop tool reports.
    pub service: Histogram<u64>,
    /// Actual send time minus intended send time, µs (open loop only).
    pub send_lag: Histogram<u64>,
    /// Measured replies, errors included.
    pub replies: u64,
    /// `-ERR …` replies plus connection failures.
    pub errors: u64,
    pub first_error: Option<String>,
    /// GETs answered with nil.
    pub misses: u64,
    /// `--verify`: GET values of the wrong length or content, unexpected reply types.
    pub verify_failures: u64,
    pub first_verify_failure: Option<String>,
    /// Measured requests sent but never answered before the drain deadline.
    pub unanswered: u64,
    /// Open loop: measured requests whose intended time passed but that were never sent.
    pub unsent: u64,
    /// Time of the last measured reply.
    pub last_reply: Option<Instant>,
}

impl Stats {
    pub fn new() -> Self {
        Stats {
            latency: new_histogram(),
            service: new_histogram(),
            send_lag: new_histogram(),
            replies: 0,
            errors: 0,
            first_error: None,
            misses: 0,
            verify_failures: 0,
            first_verify_failure: None,
            unanswered: 0,
            unsent: 0,
            last_reply: None,
        }
    }

    pub fn record_latency(&mut self, d: Duration) {
        self.latency.saturating_record(d.as_micros() as u64);
    }

    pub fn record_service(&mut self, d: Duration) {
        self.service.saturating_record(d.as_micros() as u64);
    }

    pub fn record_lag(&mut self, d: Duration) {
        self.send_lag.saturating_record(d.as_micros() as u64);
    }

    pub fn error(&mut self, text: String) {
        self.errors += 1;
        self.first_error.get_or_insert(text);
    }

    pub fn verify_failure(&mut self, text: String) {
        self.verify_failures += 1;
        self.first_verify_failure.get_or_insert(text);
    }

    pub fn merge(&mut self, other: Stats) {
        self.latency
            .add(&other.latency)
            .expect("same histogram bounds");
        self.service
            .add(&other.service)
            .expect("same histogram bounds");
        self.send_lag
            .add(&other.send_lag)
            .expect("same histogram bounds");
        self.replies += other.replies;
        self.errors += other.errors;
        self.misses += other.misses;
        self.verify_failures += other.verify_failures;
        self.unanswered += other.unanswered;
        self.unsent += other.unsent;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        if self.first_verify_failure.is_none() {
            self.first_verify_failure = other.first_verify_failure;
        }
        self.last_reply = match (self.last_reply, other.last_reply) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
}

/// The run's settings that go into the report.
pub struct RunInfo {
    pub label: String,
    pub addr: String,
    pub workload: String,
    pub connections: usize,
    pub pipeline: usize,
    pub rate: Option<f64>,
    pub value_size: usize,
    pub keys: u64,
}

/// The final figures.
pub struct Report {
    pub info: RunInfo,
    pub stats: Stats,
    /// From the end of warm-up to the last measured reply (or the deadline).
    pub elapsed: Duration,
}

const QUANTILES: [(&str, f64); 4] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)];

impl Report {
    pub fn rps(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.stats.replies as f64 / secs
        } else {
            0.0
        }
    }

    fn quantiles(h: &Histogram<u64>) -> Vec<(&'static str, u64)> {
        let mut v: Vec<(&'static str, u64)> = QUANTILES
            .iter()
            .map(|&(name, q)| {
                (
                    name,
                    if h.is_empty() {
                        0
                    } else {
                        h.value_at_quantile(q)
                    },
                )
            })
            .collect();
        v.push(("max", h.max()));
        v
    }

    pub fn human(&self) -> String {
        let i = &self.info;
        let s = &self.stats;
        let mode = match i.rate {
            Some(r) => format!("open-loop {r:.0} rps"),
            None => "closed-loop".to_string(),
        };
        let lat = Self::quantiles(&s.latency)
            .iter()
            .map(|(n, v)| format!("{n} {v}"))
            .collect::<Vec<_>>()
            .join(" ");
        let mut line = format!(
            "{label}{addr} {wl} c={c} P={p} d={d} {mode}: {n} replies in {t:.2}s = {rps:.0} rps | latency µs {lat} mean {mean:.1} | errors {e}",
            label = if i.label.is_empty() { String::new() } else { format!("[{}] ", i.label) },
            addr = i.addr,
            wl = i.workload,
            c = i.connections,
            p = i.pipeline,
            d = i.value_size,
            n = s.replies,
            t = self.elapsed.as_secs_f64(),
            rps = self.rps(),
            mean = s.latency.mean(),
            e = s.errors,
        );
        if i.rate.is_some() {
            line.push_str(&format!(
                " | service µs p50 {} p99 {} p999 {} | send lag µs p50 {} p99 {} | unsent {}",
                s.service.value_at_quantile(0.5),
                s.service.value_at_quantile(0.99),
                s.service.value_at_quantile(0.999),
                s.send_lag.value_at_quantile(0.5),
                s.send_lag.value_at_quantile(0.99),
                s.unsent
            ));
        }
        if s.misses > 0 {
            line.push_str(&format!(" | misses {}", s.misses));
        }
        if s.unanswered > 0 {
            line.push_str(&format!(" | unanswered {}", s.unanswered));
        }
        if s.verify_failures > 0 {
            line.push_str(&format!(" | verify failures {}", s.verify_failures));
        }
        if let Some(e) = &s.first_error {
            line.push_str(&format!("\nfirst error: {e}"));
        }
        if let Some(e) = &s.first_verify_failure {
            line.push_str(&format!("\nfirst verify failure: {e}"));
        }
        line
    }

    pub fn json(&self) -> String {
        let i = &self.info;
        let s = &self.stats;
        let mut f = vec![
            format!("\"label\":{}", json_str(&i.label)),
            format!("\"addr\":{}", json_str(&i.addr)),
            format!("\"workload\":{}", json_str(&i.workload)),
            format!("\"connections\":{}", i.connections),
            format!("\"pipeline\":{}", i.pipeline),
            format!(
                "\"rate\":{}",
                i.rate.map_or("null".to_string(), |r| format!("{r}"))
            ),
            format!("\"value_size\":{}", i.value_size),
            format!("\"keys\":{}", i.keys),
            format!("\"replies\":{}", s.replies),
            format!("\"elapsed_s\":{:.6}", self.elapsed.as_secs_f64()),
            format!("\"rps\":{:.1}", self.rps()),
            format!("\"mean_us\":{:.1}", s.latency.mean()),
        ];
        for (n, v) in Self::quantiles(&s.latency) {
            f.push(format!("\"{n}_us\":{v}"));
        }
        for (n, v) in Self::quantiles(&s.service) {
            f.push(format!("\"service_{n}_us\":{v}"));
        }
        for (n, v) in Self::quantiles(&s.send_lag) {
            f.push(format!("\"send_lag_{n}_us\":{v}"));
        }
        f.extend([
            format!("\"errors\":{}", s.errors),
            format!(
                "\"first_error\":{}",
                s.first_error
                    .as_deref()
                    .map_or("null".to_string(), json_str)
            ),
            format!("\"misses\":{}", s.misses),
            format!("\"verify_failures\":{}", s.verify_failures),
            format!(
                "\"first_verify_failure\":{}",
                s.first_verify_failure
                    .as_deref()
                    .map_or("null".to_string(), json_str)
            ),
            format!("\"unanswered\":{}", s.unanswered),
            format!("\"unsent\":{}", s.unsent),
        ]);
        format!("{{{}}}", f.join(","))
    }
}

/// A JSON string literal for `s`.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_quotes_and_controls() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }

    #[test]
    fn merged_stats_add_up() {
        let mut a = Stats::new();
        a.record_latency(Duration::from_micros(10));
        a.replies = 1;
        a.error("ERR one".into());
        let mut b = Stats::new();
        b.record_latency(Duration::from_micros(30));
        b.replies = 1;
        b.record_service(Duration::from_micros(20));
        b.error("ERR two".into());
        a.merge(b);
        assert_eq!(a.service.len(), 1);
        assert_eq!(a.replies, 2);
        assert_eq!(a.errors, 2);
        assert_eq!(a.first_error.as_deref(), Some("ERR one"));
        assert_eq!(a.latency.len(), 2);
        assert_eq!(a.latency.max(), 30);
    }
}
