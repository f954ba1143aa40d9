//! The checker's final report: the violation counts, the phases of the run
//! and the fault lines, as text or JSON. Filled by `workload::verify` and
//! `check::scenario`; it only formats, it never talks to a node.

/// The final verdict.
#[derive(Default)]
pub struct Report {
    pub lost: u64,
    pub stale: u64,
    pub resurrected: u64,
    pub wrong_counters: u64,
    pub lost_ttls: u64,
    pub lost_untouched: u64,
    pub orphans: u64,
    /// Transactions: account sums found broken, shared counters that lost
    /// (or gained) check-and-set increments; what ran.
    pub tx_sum: u64,
    pub tx_cas: u64,
    pub tx_transfers: u64,
    pub tx_cas_committed: u64,
    pub tx_cas_aborted: u64,
    /// Violations of the collection workloads by type (hash, list, set, zset).
    pub by_type: [u64; 4],
    /// Collection keys and TTL'd collection keys the final reads covered.
    pub coll_keys: u64,
    pub coll_ttls: u64,
    pub ops: u64,
    pub errors: u64,
    pub max_error_window_ms: u64,
    pub max_stall_ms: u64,
    pub seconds: f64,
    pub phases: Vec<(&'static str, Vec<(String, String)>)>,
    /// One line per fault scenario (see `faults.rs`).
    pub faults: Vec<String>,
    /// Fault scenarios whose phase passed before the fault could be injected.
    pub faults_missed: u64,
    /// Under `--fleet`: one line per scenario, and the violations seen
    /// while they ran (by the clients and the scenarios' own reads).
    pub scenarios: Vec<String>,
    pub scenario_violations: u64,
}

impl Report {
    pub fn violations(&self) -> u64 {
        self.lost
            + self.stale
            + self.resurrected
            + self.wrong_counters
            + self.lost_ttls
            + self.lost_untouched
            + self.orphans
            + self.tx_sum
            + self.tx_cas
            + self.faults_missed
            + self.scenario_violations
    }

    /// Adds the violation counts of another verification (through another
    /// proxy, or on the nodes).
    pub fn add_violations(&mut self, o: &Report) {
        self.lost += o.lost;
        self.stale += o.stale;
        self.resurrected += o.resurrected;
        self.wrong_counters += o.wrong_counters;
        self.lost_ttls += o.lost_ttls;
        self.tx_sum += o.tx_sum;
        self.tx_cas += o.tx_cas;
        for (t, n) in o.by_type.iter().enumerate() {
            self.by_type[t] += n;
        }
    }

    fn phase_line(&self, name: &str, info: &[(String, String)]) -> String {
        let f = |k: &str| {
            info.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
                .unwrap_or("-")
        };
        format!(
            "  {name:<14} state={:<8} epoch={:<3} copied={:<7} resynced={:<5} swept={:<7} pause_ms={:<4} persist_us={:<6} rebuild_us={:<5} {}\n",
            f("state"),
            f("epoch"),
            f("migration_keys_copied"),
            f("migration_keys_resynced"),
            f("migration_keys_swept"),
            f("migration_cutover_pause_ms"),
            f("migration_cutover_persist_us"),
            f("ring_rebuild_us"),
            f("last_error"),
        )
    }

    pub fn text(&self, backend: &str) -> String {
        let mut s = format!(
            "consistency check over {backend} nodes: {:.1} s, {} operations, {} errors\n",
            self.seconds, self.ops, self.errors
        );
        if !self.phases.is_empty() {
            s.push_str("phases:\n");
        }
        for (name, info) in &self.phases {
            s.push_str(&self.phase_line(name, info));
        }
        if !self.scenarios.is_empty() {
            s.push_str("scenarios (acked: operations answered during the scenario; violations: seen by the clients and the scenario's own reads while it ran):\n");
        }
        for l in &self.scenarios {
            s.push_str(&format!("  {l}\n"));
        }
        if !self.faults.is_empty() {
            s.push_str("faults (party fault phase -> outcome, longest request from the fault until 300 ms after the party is back, longest request since, error window):\n");
            for f in &self.faults {
                s.push_str(&format!("  {f}\n"));
            }
            s.push_str(&format!(
                "fault scenarios that missed their phase: {}\n",
                self.faults_missed
            ));
        }
        s.push_str(&format!(
            "lost acknowledged writes: {}\nstale reads: {}\nresurrected deletes: {}\nwrong counters: {}\nlost TTLs: {}\nlost or changed untouched keys: {}\norphaned copies: {}\nlongest client-visible error window: {} ms\nlongest client-visible stall (one request): {} ms\n",
            self.lost, self.stale, self.resurrected, self.wrong_counters, self.lost_ttls, self.lost_untouched, self.orphans, self.max_error_window_ms, self.max_stall_ms
        ));
        s.push_str(&format!(
            "collection keys verified: {} (with a TTL: {})\ncollection violations (hash list set zset): {} {} {} {}\n",
            self.coll_keys, self.coll_ttls, self.by_type[0], self.by_type[1], self.by_type[2], self.by_type[3]
        ));
        s.push_str(&format!(
            "transactions committed (transfers, check-and-sets, check-and-sets aborted by WATCH): {} {} {}\ntransaction violations (broken sums, lost check-and-sets): {} {}\n",
            self.tx_transfers, self.tx_cas_committed, self.tx_cas_aborted, self.tx_sum, self.tx_cas
        ));
        s.push_str(&format!(
            "verdict: {}\n",
            if self.violations() == 0 {
                "PASS (0 violations)"
            } else {
                "FAIL"
            }
        ));
        s
    }

    pub fn json(&self, backend: &str) -> String {
        format!(
            "{{\"backend\":\"{backend}\",\"seconds\":{:.1},\"ops\":{},\"errors\":{},\"lost\":{},\"stale\":{},\"resurrected\":{},\"wrong_counters\":{},\"lost_ttls\":{},\"lost_untouched\":{},\"orphans\":{},\"max_error_window_ms\":{},\"max_stall_ms\":{},\"faults_missed\":{},\"collection_violations\":{:?},\"tx_sum\":{},\"tx_cas\":{},\"violations\":{}}}",
            self.seconds, self.ops, self.errors, self.lost, self.stale, self.resurrected, self.wrong_counters, self.lost_ttls, self.lost_untouched, self.orphans, self.max_error_window_ms, self.max_stall_ms, self.faults_missed, self.by_type, self.tx_sum, self.tx_cas, self.violations()
        )
    }
}
