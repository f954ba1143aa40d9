#!/usr/bin/env bash
# bench/report.sh — regenerates test_report.md at the repo root and the charts
# in bench/report/. The report is never edited by hand: rerun this script.
#
# Builds release, then runs, one after the other (never two loads at once):
#   1. shardis demo --json --markdown --svg-dir   the tour: distribution, join,
#                                                 leave, latency at 1 000 rps and max
#   2. shardis sim --keys 10^9 --nodes 10 --add 1 (--quick: 10^8), timed
#   3. shardis sim --compare                      placement strategies side by side
#   4. bench/compare.sh --out                     redis-server, twemproxy, shardis
#   5. shardis check --backend builtin | redis    consistency through join/leave/kills
#   6. shardis demo --memory                      bytes per key vs redis-server,
#                                                 10^7 keys of 1 KB (--quick: 10^6)
#   7. bench/migration.sh                         copy rate and client throughput
#                                                 during a join and a leave, 10^6 keys of 1 KB
#   8. bench/type_memory.sh                       bytes per stream entry and per geo
#                                                 member vs redis-server (--quick: 10^5)
#   9. bench/node_vs_redis.sh                     redis-benchmark's default tests, one
#                                                 built-in node vs one redis-server
#  10. bench/tls.sh                               SET/GET at P1 and P16: shardis plaintext,
#                                                 shardis TLS, redis-server's own TLS port
#  11. shardis check --ha --backend builtin | redis   failover windows (p50, max of 5
#                                                 runs), writes lost, planned failover, Sentinel;
#                                                 stale reads under read_from = "replica"
#      bench/ha.sh                                the cost of replication: SET P1/P16 with no
#                                                 replica, write_ack primary and replica
#  12. shardis check --fleet 3                    three proxies on etcd through join, leave,
#                                                 leader kill, SIGSTOP, etcd restart, reload
#      bench/fleet.sh                             throughput and CPU per request, 1-3 proxies
# Every figure in the report comes from a command this run executed; a step
# that is missing or fails is reported as such, with the tail of its output.
#
# Usage: bench/report.sh [--quick] [--skip-compare] [--skip-memory] [--skip-check]
#                        [--skip-type-memory] [--skip-node-vs-redis] [--skip-tls] [--skip-ha]
#                        [--skip-fleet] [--out FILE]
set -u -o pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
QUICK=0
SKIP_COMPARE=0
SKIP_MEMORY=0
SKIP_CHECK=0
SKIP_TYPE_MEMORY=0
SKIP_NODE_VS_REDIS=0
SKIP_TLS=0
SKIP_HA=0
SKIP_FLEET=0
OUT="$REPO/test_report.md"
ARGS="$*"

usage() { sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1; shift ;;
        --skip-compare) SKIP_COMPARE=1; shift ;;
        --skip-memory) SKIP_MEMORY=1; shift ;;
        --skip-check) SKIP_CHECK=1; shift ;;
        --skip-type-memory) SKIP_TYPE_MEMORY=1; shift ;;
        --skip-node-vs-redis) SKIP_NODE_VS_REDIS=1; shift ;;
        --skip-tls) SKIP_TLS=1; shift ;;
        --skip-ha) SKIP_HA=1; shift ;;
        --skip-fleet) SKIP_FLEET=1; shift ;;
        --out) OUT="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "report.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done

CHARTS="$REPO/bench/report"
CHARTS_REL="bench/report"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/shardis-report.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$CHARTS"

SIM_KEYS=1000000000
SIM_KEYS_TEXT="10^9"
DEMO_FLAGS=()
CHECK_FLAGS=()
MEMORY_FLAGS=()
COMPARE_FLAGS=()
QUICK_FLAGS=()
if [ "$QUICK" = 1 ]; then
    QUICK_FLAGS=(--quick)
    SIM_KEYS=100000000
    SIM_KEYS_TEXT="10^8"
    DEMO_FLAGS=(--quick)
    CHECK_FLAGS=(--short)
    MEMORY_FLAGS=(--quick)
    COMPARE_FLAGS=(--quick)
fi

# --- build -------------------------------------------------------------------
cd "$REPO"
echo "report.sh: building release" >&2
if ! cargo build --release --bins >"$WORK/build.log" 2>&1; then
    tail -30 "$WORK/build.log" >&2
    echo "report.sh: the release build failed; no report written" >&2
    exit 1
fi
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
SHARDIS="$TARGET_DIR/release/shardis"
LOAD="$TARGET_DIR/release/shardis-load"

# --- steps -------------------------------------------------------------------
# run NAME TIMEOUT_S CMD…: runs CMD with stdout to $WORK/NAME.out, stderr to
# $WORK/NAME.err; records exit status and wall seconds in $WORK/NAME.rc/.secs.
run() {
    local name="$1" limit="$2"
    shift 2
    echo "report.sh: [$name] $*" >&2
    printf '%s\n' "$*" >"$WORK/$name.cmd"
    local t0 t1 rc
    t0=$(date +%s.%N)
    timeout --signal=TERM --kill-after=30 "$limit" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
    rc=$?
    t1=$(date +%s.%N)
    echo "$rc" >"$WORK/$name.rc"
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", b - a }' >"$WORK/$name.secs"
    echo "report.sh: [$name] exit $rc after $(cat "$WORK/$name.secs") s" >&2
}

rc() { cat "$WORK/$1.rc" 2>/dev/null || echo "not run"; }
secs() { cat "$WORK/$1.secs" 2>/dev/null || echo "?"; }
# The command as run, with the build path shortened.
cmd() { sed -e "s#$SHARDIS#shardis#g" -e "s#$WORK/##g" -e "s#$REPO/##g" "$WORK/$1.cmd"; }

START=$(date +%s)
run demo 1200 "$SHARDIS" demo "${DEMO_FLAGS[@]}" --json "$WORK/demo.json" \
    --markdown "$WORK/demo.md" --svg-dir "$CHARTS"
run sim 1800 "$SHARDIS" sim --keys "$SIM_KEYS" --nodes 10 --add 1
run sim_compare 600 "$SHARDIS" sim --compare
if [ "$SKIP_COMPARE" = 1 ]; then
    echo "skipped (--skip-compare)" >"$WORK/compare.skipped"
elif [ ! -x "$REPO/bench/compare.sh" ]; then
    echo "bench/compare.sh is missing or not executable" >"$WORK/compare.skipped"
else
    run compare 5400 "$REPO/bench/compare.sh" "${COMPARE_FLAGS[@]}" --out "$WORK/compare.md" \
        --shardis "$SHARDIS" --load "$LOAD"
fi
if [ "$SKIP_CHECK" = 0 ]; then
    run check_builtin 1200 "$SHARDIS" check --backend builtin "${CHECK_FLAGS[@]}"
    if command -v redis-server >/dev/null; then
        run check_redis 1200 "$SHARDIS" check --backend redis "${CHECK_FLAGS[@]}"
    fi
fi
if [ "$SKIP_MEMORY" = 0 ]; then
    run memory 3600 "$SHARDIS" demo --memory "${MEMORY_FLAGS[@]}" --json "$WORK/memory.json" \
        --markdown "$WORK/memory.md"
fi
MIGRATION_KEYS=1000000
[ "$QUICK" = 1 ] && MIGRATION_KEYS=100000
run migration 1800 "$REPO/bench/migration.sh" --keys "$MIGRATION_KEYS" --out "$WORK/migration.md"
if [ "$SKIP_TYPE_MEMORY" = 0 ]; then
    run type_memory 1800 "$REPO/bench/type_memory.sh" "${QUICK_FLAGS[@]}" --shardis "$SHARDIS" \
        --out "$WORK/type_memory.md"
fi
if [ "$SKIP_NODE_VS_REDIS" = 0 ]; then
    run node_vs_redis 3600 "$REPO/bench/node_vs_redis.sh" "${QUICK_FLAGS[@]}" --shardis "$SHARDIS" \
        --out "$WORK/node_vs_redis.md"
fi
TLS_REQUESTS=200000
[ "$QUICK" = 1 ] && TLS_REQUESTS=50000
if [ "$SKIP_TLS" = 0 ]; then
    run tls 1800 "$REPO/bench/tls.sh" --requests "$TLS_REQUESTS" --shardis "$SHARDIS" \
        --out "$WORK/tls.md"
fi
if [ "$SKIP_HA" = 0 ]; then
    # --short under --quick: 2 runs of each kill scenario instead of 5.
    run ha_builtin 1800 "$SHARDIS" check --ha --backend builtin "${CHECK_FLAGS[@]}"
    if command -v redis-server >/dev/null; then
        run ha_redis 1800 "$SHARDIS" check --ha --backend redis "${CHECK_FLAGS[@]}"
    fi
    run ha_cost 1800 "$REPO/bench/ha.sh" "${QUICK_FLAGS[@]}" --out "$WORK/ha_cost.md" \
        --shardis "$SHARDIS" --load "$LOAD"
fi
if [ "$SKIP_FLEET" = 0 ] && command -v etcd >/dev/null; then
    run fleet_check 1800 "$SHARDIS" check --fleet 3 "${CHECK_FLAGS[@]}"
    run fleet_bench 900 "$REPO/bench/fleet.sh" "${QUICK_FLAGS[@]}" --out "$WORK/fleet.md" \
        --shardis "$SHARDIS" --load "$LOAD"
fi
TOTAL_MIN=$(( ($(date +%s) - START + 59) / 60 ))

# --- report ------------------------------------------------------------------
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git status --porcelain -- . ':!test_report.md' ':!bench/report' 2>/dev/null)" ]; then
    commit="$commit (with uncommitted changes)"
fi
cores="$(nproc)"
mem_gib="$(awk '/^MemTotal:/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)"
cpu="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
redis_version="$(redis-server --version 2>/dev/null | sed -n 's/.*v=\([^ ]*\).*/\1/p')"

fence() { echo '```text'; cat "$1"; echo '```'; }

# step_status NAME: one line saying how the step ended.
step_status() {
    local r
    r="$(rc "$1")"
    case "$r" in
        0) echo "Ran \`$(cmd "$1")\` in $(secs "$1") s (exit 0)." ;;
        124|137) echo "**TIMED OUT**: \`$(cmd "$1")\` was stopped after $(secs "$1") s." ;;
        "not run") echo "**Not run.**" ;;
        *) echo "**FAILED** (exit $r): \`$(cmd "$1")\` after $(secs "$1") s." ;;
    esac
}

# failure_tail NAME: the end of a failed step's output.
failure_tail() {
    if [ "$(rc "$1")" != 0 ] && [ -f "$WORK/$1.err" ]; then
        echo
        echo "Last lines of its output:"
        echo
        echo '```text'
        tail -n 25 "$WORK/$1.out" 2>/dev/null
        tail -n 25 "$WORK/$1.err" | tr '\r' '\n' | grep -v '^\s*$' | tail -n 25
        echo '```'
    fi
}

# glance: headline figures, from the JSON the demo and memory steps wrote.
glance() {
    if ! command -v jq >/dev/null; then
        echo "(jq not found: see the sections below for the figures.)"
        return
    fi
    echo "| figure | value | from |"
    echo "|---|---|---|"
    if [ "$(rc demo)" = 0 ] && [ -f "$WORK/demo.json" ]; then
        jq -r '
          def f2: (. * 100 | round) / 100;
          def ms: (. / 10 | round) / 100;
          def lat($op; $mode; $p): [.latency[] | select(.op == $op and .mode == $mode and .pipeline == $p)][0];
          def pp($r): "p50 \($r.p50_us | ms) ms, p99 \($r.p99_us | ms) ms, p99.9 \($r.p999_us | ms) ms (\($r.ops_per_sec | round) ops/s)";
          "| keys per node, 10 nodes | max/avg \(.distribution.max_over_avg * 1000 | round / 1000), min/avg \(.distribution.min_over_avg * 1000 | round / 1000) | demo |",
          "| join 10 → 11: keys moved | \(.join.moved_pct | f2)% (ideal \(.join.ideal_pct | f2)%), \(.join.reads_during.missing + .join.verify_after.missing) missing | demo |",
          "| leave \(.leave.node): keys moved | \(.leave.moved_pct | f2)% (ideal \(.leave.ideal_pct | f2)%), \(.leave.reads_during.missing + .leave.verify_after.missing) missing, \(.leave.removed_node_keys_after) left on it | demo |",
          "| ring rebuild (join / leave) | \(.join.ring_rebuild_us) µs / \(.leave.ring_rebuild_us) µs | demo |",
          "| migration, cutover pause (join) | \(.join.migration_ms) ms, \(.join.cutover_pause_ms) ms | demo |",
          "| GET at \(lat("GET"; "open"; 1).target_rps) rps | \(pp(lat("GET"; "open"; 1))) | demo |",
          "| SET at \(lat("SET"; "open"; 1).target_rps) rps | \(pp(lat("SET"; "open"; 1))) | demo |",
          "| GET max, pipelined P16 | \(pp(lat("GET"; "closed"; 16))) | demo |",
          "| SET max, pipelined P16 | \(pp(lat("SET"; "closed"; 16))) | demo |",
          "| GET max, unpipelined | \(pp(lat("GET"; "closed"; 1))) | demo |"
        ' "$WORK/demo.json"
    else
        echo "| demo | $(step_status demo) | demo |"
    fi
    if [ "$(rc sim)" = 0 ]; then
        echo "| $SIM_KEYS_TEXT keys, 10 → 11 nodes | $(grep -m1 '^Join' "$WORK/sim.out" | sed 's/^Join [^:]*: //'); wall $(secs sim) s | sim |"
    fi
    for b in builtin redis; do
        [ -f "$WORK/check_$b.rc" ] || continue
        echo "| consistency check, $b | $(grep -m1 '^verdict' "$WORK/check_$b.out" || echo "exit $(rc check_$b)") | check |"
    done
    for b in builtin redis; do
        [ -f "$WORK/ha_$b.rc" ] || continue
        local w
        w="$(grep -m1 '^| kill -9 primary, 2 replicas' "$WORK/ha_$b.out" | awk -F'|' '{gsub(/ /, "", $4); gsub(/ /, "", $5); print "p50 " $4 " ms, max " $5 " ms"}')"
        echo "| failover window, $b, kill -9 of a primary | ${w:-see section 11}; $(grep -m1 '^verdict' "$WORK/ha_$b.out" || echo "exit $(rc ha_$b)") | check --ha |"
        local s p
        s="$(grep -m1 '^| small max_lag_bytes' "$WORK/ha_$b.out" | awk -F'|' '{for (i = 2; i <= 14; i++) gsub(/^ +| +$/, "", $i); print "in sync, max_lag_bytes " $3 ": " $7 " stale of " $4 " reads (" $8 " %), at most " $9 " versions, " $10 " ms, " $11 " B (est.) behind"}')"
        p="$(grep -m1 '^| replica paused' "$WORK/ha_$b.out" | awk -F'|' '{for (i = 2; i <= 14; i++) gsub(/^ +| +$/, "", $i); print "replica paused past max_lag_bytes " $3 ": " $7 " stale, at most " $9 " versions, " $10 " ms, " $11 " B (est.) behind; read after the bound: " $14}')"
        echo "| stale reads, $b, read_from = replica | ${s:-see section 11}${p:+; $p} | check --ha |"
    done
    if [ -f "$WORK/fleet_check.rc" ]; then
        echo "| fleet of 3 proxies on etcd, six scenarios | $(grep -m1 'verdict' "$WORK/fleet_check.out" | sed 's/.*verdict/verdict/' || echo "exit $(rc fleet_check)") | check --fleet |"
    fi
    if [ -f "$WORK/memory.json" ]; then
        jq -r '.backends[] | "| memory per key, \(.backend) | \(.rss_bytes_per_key | round) B RSS, \(.used_bytes_per_key | round) B used_memory (value \(.value_size) B); 10^9 keys → \(.nodes_needed) nodes of 100 GB | memory |"' "$WORK/memory.json"
    fi
}

{
    echo "# shardis test report"
    echo
    echo "Generated by \`bench/report.sh${ARGS:+ $ARGS}\` on $(date -u '+%Y-%m-%d %H:%M UTC') in ${TOTAL_MIN} min."
    echo "Do not edit by hand: rerun the command. Every figure below comes from a command that run executed."
    echo
    echo "| | |"
    echo "|---|---|"
    echo "| commit | \`$commit\` |"
    echo "| machine | ${cores} cores (nproc), ${mem_gib} GiB memory (MemTotal), ${cpu:-unknown CPU}, $(uname -sr) |"
    echo "| redis-server | ${redis_version:-not installed} |"
    echo
    echo "Load generators, proxy and nodes share these cores on a machine others also use, so single"
    echo "figures are noisy: compare medians and ratios, not single runs."
    echo
    echo "## At a glance"
    echo
    glance
    echo
    echo "## 1. The tour: \`shardis demo\`"
    echo
    step_status demo
    echo "Ten built-in nodes and a proxy as child processes on free loopback ports; keys written"
    echo "through the proxy; keys per node from DBSIZE on each node; a node added and one removed while"
    echo "two readers MGET every key in turn; latency through the proxy."
    echo
    if [ -f "$WORK/demo.md" ]; then
        echo "![keys per node]($CHARTS_REL/keys-per-node.svg)"
        echo
        cat "$WORK/demo.md"
        echo
        echo "![latency]($CHARTS_REL/latency.svg)"
        echo
        echo "<details><summary>Full output</summary>"
        echo
        fence "$WORK/demo.out"
        echo
        echo "</details>"
    fi
    failure_tail demo
    echo
    echo "## 2. Distribution of $SIM_KEYS_TEXT keys: \`shardis sim\`"
    echo
    step_status sim
    echo "Synthetic \`user:<n>\` keys through the same ring code the proxy uses, no data stored."
    echo
    [ "$(rc sim)" = 0 ] && fence "$WORK/sim.out"
    failure_tail sim
    echo
    echo "## 3. Placement strategies: \`shardis sim --compare\`"
    echo
    step_status sim_compare
    echo
    [ "$(rc sim_compare)" = 0 ] && fence "$WORK/sim_compare.out"
    failure_tail sim_compare
    echo
    echo "## 4. Side by side with redis-server and twemproxy: \`bench/compare.sh\`"
    echo
    if [ -f "$WORK/compare.skipped" ]; then
        echo "**Not run**: $(cat "$WORK/compare.skipped"). No figures here."
    else
        step_status compare
        echo
        if [ "$(rc compare)" = 0 ] && [ -s "$WORK/compare.md" ]; then
            # Its headings go one level below this section's.
            sed -e 's/^# /### /' -e 's/^## /#### /' "$WORK/compare.md"
        elif [ "$(rc compare)" = 0 ]; then
            echo "**It wrote no table**, so there are no figures here."
        fi
        failure_tail compare
    fi
    echo
    echo "## 5. Consistency under topology changes: \`shardis check\`"
    echo
    if [ "$SKIP_CHECK" = 1 ]; then
        echo "**Not run** (--skip-check)."
    fi
    for b in builtin redis; do
        [ -f "$WORK/check_$b.rc" ] || continue
        echo "### $b nodes"
        echo
        step_status "check_$b"
        echo
        fence "$WORK/check_$b.out"
        failure_tail "check_$b"
        echo
    done
    if [ "$SKIP_CHECK" = 0 ] && [ ! -f "$WORK/check_redis.rc" ]; then
        echo "redis-server is not installed: the redis backend was not checked."
    fi
    echo
    echo "## 6. Memory per key: \`shardis demo --memory\`"
    echo
    if [ "$SKIP_MEMORY" = 1 ]; then
        echo "**Not run** (--skip-memory)."
    else
        step_status memory
        echo
        [ -f "$WORK/memory.md" ] && cat "$WORK/memory.md"
        if [ -s "$WORK/memory.out" ]; then
            echo
            echo "<details><summary>Per node</summary>"
            echo
            fence "$WORK/memory.out"
            echo
            echo "</details>"
        fi
        failure_tail memory
    fi
    echo
    echo "## 7. Migration speed and the throughput dip: \`bench/migration.sh\`"
    echo
    step_status migration
    echo
    [ "$(rc migration)" = 0 ] && [ -s "$WORK/migration.md" ] && cat "$WORK/migration.md"
    failure_tail migration
    echo
    echo "## 8. Memory per stream entry and per geo member: \`bench/type_memory.sh\`"
    echo
    if [ "$SKIP_TYPE_MEMORY" = 1 ]; then
        echo "**Not run** (--skip-type-memory)."
    else
        step_status type_memory
        echo
        [ "$(rc type_memory)" = 0 ] && [ -s "$WORK/type_memory.md" ] && cat "$WORK/type_memory.md"
        failure_tail type_memory
    fi
    echo
    echo "## 9. One built-in node against one redis-server: \`bench/node_vs_redis.sh\`"
    echo
    if [ "$SKIP_NODE_VS_REDIS" = 1 ]; then
        echo "**Not run** (--skip-node-vs-redis)."
    else
        step_status node_vs_redis
        echo
        [ "$(rc node_vs_redis)" = 0 ] && [ -s "$WORK/node_vs_redis.md" ] && cat "$WORK/node_vs_redis.md"
        failure_tail node_vs_redis
    fi
    echo
    echo "## 10. What TLS costs: \`bench/tls.sh\`"
    echo
    if [ "$SKIP_TLS" = 1 ]; then
        echo "**Not run** (--skip-tls)."
    else
        step_status tls
        echo
        [ "$(rc tls)" = 0 ] && [ -s "$WORK/tls.md" ] && cat "$WORK/tls.md"
        failure_tail tls
    fi
    echo
    echo "## 11. High availability: \`shardis check --ha\` and \`bench/ha.sh\`"
    echo
    if [ "$SKIP_HA" = 1 ]; then
        echo "**Not run** (--skip-ha)."
    else
        echo "Each scenario on a fresh cluster; the window runs from the first failed request to the"
        echo "end of the first successful write that started after it. The second table of each"
        echo "backend: stale reads under \`read_from = \"replica\"\`, with the replica in sync and with"
        echo "it paused (SIGSTOP) past \`max_lag_bytes\`; bytes behind are an estimate (SETs × their size)."
        echo
        for b in builtin redis; do
            [ -f "$WORK/ha_$b.rc" ] || continue
            echo "### Failover and stale reads, $b nodes"
            echo
            step_status "ha_$b"
            echo
            [ -s "$WORK/ha_$b.out" ] && cat "$WORK/ha_$b.out"
            failure_tail "ha_$b"
            echo
        done
        [ -f "$WORK/ha_redis.rc" ] || echo "redis-server is not installed: the redis backend and Sentinel mode were not checked."
        echo "### The cost of replication"
        echo
        step_status ha_cost
        echo
        [ "$(rc ha_cost)" = 0 ] && [ -s "$WORK/ha_cost.md" ] && cat "$WORK/ha_cost.md"
        failure_tail ha_cost
    fi
    echo
    echo "## 12. A fleet of proxies on etcd: \`shardis check --fleet 3\` and \`bench/fleet.sh\`"
    echo
    if [ "$SKIP_FLEET" = 1 ]; then
        echo "**Not run** (--skip-fleet)."
    elif [ ! -f "$WORK/fleet_check.rc" ]; then
        echo "**Not run**: etcd is not installed (Debian package etcd-server)."
    else
        echo "### Consistency with clients on three proxies"
        echo
        step_status fleet_check
        echo
        if [ -s "$WORK/fleet_check.out" ]; then
            echo '```'
            cat "$WORK/fleet_check.out"
            echo '```'
        fi
        failure_tail fleet_check
        echo
        echo "### Throughput with 1, 2 and 3 proxies"
        echo
        step_status fleet_bench
        echo
        [ "$(rc fleet_bench)" = 0 ] && [ -s "$WORK/fleet.md" ] && cat "$WORK/fleet.md"
        failure_tail fleet_bench
    fi
} >"$OUT"

echo "report.sh: wrote $OUT and $CHARTS_REL/*.svg" >&2
