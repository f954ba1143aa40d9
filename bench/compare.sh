#!/usr/bin/env bash
# bench/compare.sh — throughput, latency and CPU per request of shardis against
# redis-server directly and twemproxy, all on loopback, all started (and
# stopped) by this script.
#
# Targets (ports are in 17xxx/18xxx so a dev cluster on 7000.. is untouched):
#   redis        one redis-server                              127.0.0.1:17201
#   twemproxy    nutcracker (md5/ketama) over 10 redis-servers 127.0.0.1:17001 -> 17101..17110
#   shardis-r    shardis proxy over the same 10 redis-servers  127.0.0.1:17002 -> 17101..17110
#   shardis-b    shardis proxy over 10 built-in nodes          127.0.0.1:18000 -> 18001..18010
#   node         one built-in node                             127.0.0.1:18101
#
# Tests: redis-benchmark SET/GET x (-c 50 -P 1 | -c 50 -P 16 | -c 1 -P 1) x (-d 100 | -d 1024),
# then shardis-load open loop GET 1 KB at 1 000 and 10 000 rps. Each figure is
# the median of --reps runs; targets are interleaved within each repetition so
# machine noise spreads over all of them, in an order rotated each repetition.
#
# Usage: bench/compare.sh [--reps N] [--quick] [--out FILE.md] [--json FILE]
#                         [--shardis PATH] [--load PATH] [--no-load] [--keep] [--only REGEX]
#   --only REGEX   run only the redis-benchmark tests whose name matches (e.g. 'c1|P16')
set -u -o pipefail

REPS=3
QUICK=0
OUT=""
JSON_OUT=""
RUN_LOAD=1
KEEP=0
ONLY=""
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
. "$HERE/lib.sh"
SHARDIS=""
LOAD=""

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --reps) REPS="$2"; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --out) OUT="$2"; shift 2 ;;
        --json) JSON_OUT="$2"; shift 2 ;;
        --shardis) SHARDIS="$2"; shift 2 ;;
        --load) LOAD="$2"; shift 2 ;;
        --no-load) RUN_LOAD=0; shift ;;
        --keep) KEEP=1; shift ;;
        --only) ONLY="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "compare.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
case "$REPS" in ''|*[!0-9]*|0) echo "compare.sh: --reps needs a positive integer" >&2; exit 2 ;; esac
[ "$QUICK" = 1 ] && REPS=1

# --- sizes -------------------------------------------------------------------
# -n per mode, chosen so each run takes a few seconds through a proxy here.
N_P1=400000; N_P16=1500000; N_C1=30000
LG_SECS=5; LG_WARMUP_SECS=1; LG_CONNS=20; LG_RATES="1000 10000"
if [ "$QUICK" = 1 ]; then
    N_P1=40000; N_P16=150000; N_C1=10000; LG_SECS=2
fi
KEYSPACE=100000          # redis-benchmark -r
LG_KEYS=10000            # shardis-load --keys (preloaded)
RUN_TIMEOUT_S=180        # hard bound on any single benchmark run
READY_TIMEOUT_DS=50      # tenths of a second to wait for a server to answer PING

# --- tools -------------------------------------------------------------------
for tool in redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null || { echo "compare.sh: $tool not found" >&2; exit 1; }
done
NUTCRACKER="$(command -v nutcracker || true)"
[ -z "$NUTCRACKER" ] && [ -x /usr/sbin/nutcracker ] && NUTCRACKER=/usr/sbin/nutcracker
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
if [ -z "$SHARDIS" ]; then
    for c in "$REPO/target/release/shardis" "$TARGET_DIR/release/shardis"; do
        [ -x "$c" ] && { SHARDIS="$c"; break; }
    done
fi
if [ -z "$LOAD" ]; then
    for c in "$TARGET_DIR/release/shardis-load" "$REPO/target/release/shardis-load"; do
        [ -x "$c" ] && { LOAD="$c"; break; }
    done
fi
if [ "$RUN_LOAD" = 1 ] && [ -z "$LOAD" ]; then
    echo "compare.sh: building shardis-load" >&2
    (cd "$REPO" && cargo build --release --quiet --bin shardis-load) || { echo "compare.sh: build of shardis-load failed" >&2; exit 1; }
    LOAD="$TARGET_DIR/release/shardis-load"
fi
CLK_TCK="$(getconf CLK_TCK)"

# --- process bookkeeping -----------------------------------------------------
WORK="$(mktemp -d /tmp/shardis-bench.XXXXXX)"
PIDS=()
LAST_PID=""

cleanup() {
    local pid i
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do
        for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    if [ "$KEEP" = 1 ]; then echo "compare.sh: logs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CMD... : runs CMD in the background, logs to $WORK/NAME.log, sets LAST_PID.
start() {
    local name="$1"; shift
    "$@" >"$WORK/$name.log" 2>&1 &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}

is_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }


# cpu_ticks PID : utime+stime of PID in clock ticks (fields 14 and 15 of /proc/PID/stat).
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $12 + $13}'; }

log_tail() { tail -n 3 "$WORK/$1.log" 2>/dev/null | tr '\n' ' '; }

# --- targets -----------------------------------------------------------------
TARGETS=(redis twemproxy shardis-r shardis-b node)
declare -A PORT PROC AVAIL REASON
PORT[redis]=17201; PORT[twemproxy]=17001; PORT[shardis-r]=17002; PORT[shardis-b]=18000; PORT[node]=18101
REDIS_PORTS=$(seq 17101 17110)
NODE_PORTS=$(seq 18001 18010)

for p in ${PORT[@]} $REDIS_PORTS $NODE_PORTS 17091; do
    if is_port_open "$p"; then
        echo "compare.sh: port $p is already in use; refusing to benchmark someone else's server" >&2
        exit 1
    fi
done

unavailable() { AVAIL[$1]=0; REASON[$1]="$2"; echo "compare.sh: skipping $1: $2" >&2; }

start_redis() { # NAME PORT
    start "$1" redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no \
        --protected-mode no --daemonize no --dir "$WORK"
}

echo "compare.sh: starting servers (work dir $WORK)" >&2
start_redis redis "${PORT[redis]}"; PROC[redis]=$LAST_PID
if wait_ready "${PORT[redis]}" "$LAST_PID"; then AVAIL[redis]=1; else unavailable redis "redis-server did not start: $(log_tail redis)"; fi

cluster_ok=1
for p in $REDIS_PORTS; do
    start_redis "redis-$p" "$p"
    wait_ready "$p" "$LAST_PID" || { cluster_ok=0; echo "compare.sh: redis-server on $p did not start: $(log_tail "redis-$p")" >&2; }
done

# twemproxy
if [ -z "$NUTCRACKER" ]; then
    unavailable twemproxy "nutcracker not installed"
elif [ "$cluster_ok" = 0 ]; then
    unavailable twemproxy "backend redis-servers did not start"
else
    {
        echo "bench:"
        echo "  listen: 127.0.0.1:${PORT[twemproxy]}"
        echo "  hash: md5"
        echo "  distribution: ketama"
        echo "  hash_tag: \"{}\""
        echo "  auto_eject_hosts: false"
        echo "  redis: true"
        echo "  server_connections: 1"
        echo "  preconnect: true"
        echo "  servers:"
        i=1; for p in $REDIS_PORTS; do echo "   - 127.0.0.1:$p:1 node$i"; i=$((i + 1)); done
    } >"$WORK/twemproxy.yml"
    start twemproxy "$NUTCRACKER" -c "$WORK/twemproxy.yml" -s 17091 -a 127.0.0.1 -v 4
    PROC[twemproxy]=$LAST_PID
    if wait_ready "${PORT[twemproxy]}" "$LAST_PID"; then AVAIL[twemproxy]=1
    else unavailable twemproxy "nutcracker did not start: $(log_tail twemproxy)"; fi
fi

# write_proxy_config FILE LISTEN_PORT BACKEND_PORTS...
write_proxy_config() {
    local file="$1" listen="$2" i=1 p; shift 2
    {
        echo "[proxy]"
        echo "listen = \"127.0.0.1:$listen\""
        echo "[ring]"
        echo "points = \"ketama\""
        echo "vnodes = 160"
        for p in "$@"; do
            echo "[[nodes]]"
            echo "addr = \"127.0.0.1:$p\""
            echo "name = \"node$i\""
            i=$((i + 1))
        done
    } >"$file"
}

# start_shardis_proxy TARGET CONFIG
start_shardis_proxy() {
    start "$1" "$SHARDIS" proxy --config "$2"
    PROC[$1]=$LAST_PID
    if wait_ready "${PORT[$1]}" "$LAST_PID"; then AVAIL[$1]=1
    else unavailable "$1" "'shardis proxy --config' did not answer PING within $((READY_TIMEOUT_DS / 10))s: $(log_tail "$1")"; fi
}

if [ -z "$SHARDIS" ]; then
    for t in shardis-r shardis-b node; do
        unavailable "$t" "no shardis binary in $(echo "$REPO/target/release $TARGET_DIR/release" | tr ' ' '\n' | sort -u | tr '\n' ' ')(cargo build --release, or --shardis PATH)"
    done
else
    # (c) shardis over the same 10 redis-servers, same node names as twemproxy: same placement.
    if [ "$cluster_ok" = 1 ]; then
        write_proxy_config "$WORK/shardis-r.toml" "${PORT[shardis-r]}" $REDIS_PORTS
        start_shardis_proxy shardis-r "$WORK/shardis-r.toml"
    else
        unavailable shardis-r "backend redis-servers did not start"
    fi
    # (d) shardis over 10 built-in nodes, each its own process.
    nodes_ok=1
    for p in $NODE_PORTS; do
        start "node-$p" "$SHARDIS" node --port "$p"
        if ! wait_ready "$p" "$LAST_PID"; then
            nodes_ok=0
            why="'shardis node --port $p' did not answer PING: $(log_tail "node-$p")"
            break
        fi
    done
    if [ "$nodes_ok" = 1 ]; then
        write_proxy_config "$WORK/shardis-b.toml" "${PORT[shardis-b]}" $NODE_PORTS
        start_shardis_proxy shardis-b "$WORK/shardis-b.toml"
    else
        unavailable shardis-b "$why"
    fi
    # (e) one built-in node alone.
    start node "$SHARDIS" node --port "${PORT[node]}"
    PROC[node]=$LAST_PID
    if wait_ready "${PORT[node]}" "$LAST_PID"; then AVAIL[node]=1
    else unavailable node "'shardis node --port ${PORT[node]}' did not answer PING: $(log_tail node)"; fi
fi

ACTIVE=()
for t in "${TARGETS[@]}"; do [ "${AVAIL[$t]:-0}" = 1 ] && ACTIVE+=("$t"); done
[ ${#ACTIVE[@]} -eq 0 ] && { echo "compare.sh: no target started" >&2; exit 1; }
echo "compare.sh: targets: ${ACTIVE[*]}; reps $REPS$([ "$QUICK" = 1 ] && echo ' (quick)')" >&2

# --- redis-benchmark runs ----------------------------------------------------
RB="$WORK/rb.tsv"    # rep target test rps p50_ms p99_ms cpu_us_per_req
LG="$WORK/lg.tsv"    # rep target rate rps p50_us p99_us p999_us cpu_us_per_req errors
: >"$RB"; : >"$LG"

# TESTS: name op clients pipeline size requests
TESTS=()
for size in 100 1024; do
    label=$([ "$size" = 100 ] && echo 100B || echo 1KB)
    for op in set get; do
        OP=$(echo "$op" | tr a-z A-Z)
        TESTS+=("$OP-P1-$label $op 50 1 $size $N_P1")
        TESTS+=("$OP-P16-$label $op 50 16 $size $N_P16")
        TESTS+=("$OP-c1-$label $op 1 1 $size $N_C1")
    done
done
if [ -n "$ONLY" ]; then
    KEPT=()
    for spec in "${TESTS[@]}"; do
        set -- $spec
        printf '%s\n' "$1" | grep -Eq -- "$ONLY" && KEPT+=("$spec")
    done
    TESTS=("${KEPT[@]}")
fi

run_rb() { # REP TARGET NAME OP CLIENTS PIPELINE SIZE N
    local rep="$1" t="$2" name="$3" op="$4" c="$5" pl="$6" d="$7" n="$8"
    local pid="${PROC[$t]}" c0 c1 out line
    c0=$(cpu_ticks "$pid")
    out=$(timeout "$RUN_TIMEOUT_S" redis-benchmark -h 127.0.0.1 -p "${PORT[$t]}" -c "$c" -P "$pl" \
        -n "$n" -r "$KEYSPACE" -d "$d" -t "$op" --csv 2>/dev/null)
    c1=$(cpu_ticks "$pid")
    line=$(printf '%s\n' "$out" | grep -i "^\"$op\"" | head -n 1)
    if [ -z "$line" ]; then
        echo "compare.sh: $t $name: redis-benchmark gave no result" >&2
        return
    fi
    # "GET","rps","avg","min","p50","p95","p99","max"
    printf '%s\n' "$line" | tr -d '"' | awk -F, -v rep="$rep" -v t="$t" -v name="$name" \
        -v c0="$c0" -v c1="$c1" -v tck="$CLK_TCK" -v n="$n" \
        'BEGIN{OFS="\t"} {cpu = (c0 == "" || c1 == "") ? "-" : sprintf("%.2f", (c1 - c0) * 1e6 / tck / n);
                         print rep, t, name, $2, $5, $7, cpu}' >>"$RB"
    echo "  rep $rep $name $t: $(tail -n 1 "$RB" | cut -f4) rps" >&2
}

run_lg() { # REP TARGET RATE
    local rep="$1" t="$2" rate="$3" pid="${PROC[$2]}" c0 c1 out
    c0=$(cpu_ticks "$pid")
    out=$(timeout "$RUN_TIMEOUT_S" "$LOAD" --addr "127.0.0.1:${PORT[$t]}" --workload get -d 1024 \
        --keys "$LG_KEYS" --key-prefix lg: --rate "$rate" -c "$LG_CONNS" --duration "${LG_SECS}s" \
        --warmup "${LG_WARMUP_SECS}s" --verify --json --label "$t" 2>>"$WORK/load.err")
    c1=$(cpu_ticks "$pid")
    if [ -z "$out" ]; then echo "compare.sh: $t load $rate rps: no result ($(tail -n 1 "$WORK/load.err"))" >&2; return; fi
    # CPU covers the warm-up too, so divide by everything sent: rate x (warm-up + duration).
    printf '%s\n' "$out" | awk -v rep="$rep" -v t="$t" -v rate="$rate" -v c0="$c0" -v c1="$c1" -v tck="$CLK_TCK" \
        -v total="$((rate * (LG_SECS + LG_WARMUP_SECS)))" '
        function field(k,   m) { if (match($0, "\"" k "\":[-0-9.]+")) { m = substr($0, RSTART, RLENGTH); sub(/^[^:]*:/, "", m); return m } return "-" }
        { cpu = (c0 != "" && c1 != "") ? sprintf("%.2f", (c1 - c0) * 1e6 / tck / total) : "-"
          printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rep, t, rate, field("rps"), field("p50_us"), field("p99_us"), field("p999_us"), cpu, field("errors") + field("verify_failures") + field("unanswered") }' >>"$LG"
    echo "  rep $rep load GET 1KB @${rate} $t: p50 $(tail -n 1 "$LG" | cut -f5) µs p99 $(tail -n 1 "$LG" | cut -f6) µs" >&2
}

if [ "$RUN_LOAD" = 1 ]; then
    for t in "${ACTIVE[@]}"; do
        timeout "$RUN_TIMEOUT_S" "$LOAD" --addr "127.0.0.1:${PORT[$t]}" --workload get -d 1024 \
            --keys "$LG_KEYS" --key-prefix lg: --preload -n 1 -c 8 >/dev/null 2>>"$WORK/load.err" ||
            echo "compare.sh: preload on $t failed: $(tail -n 1 "$WORK/load.err")" >&2
    done
fi

for rep in $(seq 1 "$REPS"); do
    # Rotate the order each repetition: a target's position in the sequence
    # alone moved its throughput by 5-12% here, so none may always go first.
    k=$(( (rep - 1) % ${#ACTIVE[@]} ))
    ORDER=("${ACTIVE[@]:k}" "${ACTIVE[@]:0:k}")
    for spec in "${TESTS[@]}"; do
        set -- $spec
        for t in "${ORDER[@]}"; do run_rb "$rep" "$t" "$@"; done
    done
    if [ "$RUN_LOAD" = 1 ]; then
        for rate in $LG_RATES; do
            for t in "${ORDER[@]}"; do run_lg "$rep" "$t" "$rate"; done
        done
    fi
done

# --- report ------------------------------------------------------------------
# Medians over repetitions; one markdown report to stdout (and --out), one JSON
# object to --json. A target that did not start shows "-" and is listed with
# the reason under the tables.
AVAIL_LIST=""; REASONS=""
for t in "${TARGETS[@]}"; do
    AVAIL_LIST="$AVAIL_LIST $t=${AVAIL[$t]:-0}"
    [ "${AVAIL[$t]:-0}" = 1 ] || REASONS="$REASONS$t: ${REASON[$t]:-not started}"$'\x1f'
done
TEST_ORDER=""
for spec in "${TESTS[@]}"; do set -- $spec; TEST_ORDER="$TEST_ORDER $1"; done
NUTVER=$([ -n "$NUTCRACKER" ] && "$NUTCRACKER" --version 2>&1 | head -n 1 | sed 's/^This is //')
HEADER="$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(redis-server --version | awk '{print $3}' | tr -d 'v='), ${NUTVER:-no nutcracker}, shardis $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?'), reps $REPS$([ "$QUICK" = 1 ] && echo ', quick')"

report() { # FORMAT (md|json)
    awk -F'\t' -v fmt="$1" -v avail="$AVAIL_LIST" -v order="$TEST_ORDER" -v rates="$([ "$RUN_LOAD" = 1 ] && echo "$LG_RATES")" \
        -v reasons="$REASONS" -v header="$HEADER" -v lgc="$LG_CONNS" -v lgs="$LG_SECS" \
        -v np1="$N_P1" -v np16="$N_P16" -v nc1="$N_C1" -v keyspace="$KEYSPACE" '
    function push(k, v) { if (v == "" || v == "-") return; vals[k] = (k in vals) ? vals[k] " " v : v }
    function median(k,   a, n, i, j, x) {
        if (!(k in vals)) return "-"
        n = split(vals[k], a, " ")
        for (i = 2; i <= n; i++) { x = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
        return (n % 2) ? a[(n + 1) / 2] + 0 : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function ratio(a, b) { return (a == "-" || b == "-" || b == 0) ? "-" : sprintf("%.2f", a / b) }
    function fix(v, p) { return (v == "-") ? "-" : sprintf("%." p "f", v) }
    function jnum(v) { return (v == "-") ? "null" : v }
    FILENAME ~ /rb.tsv$/ { push($2 "|" $3 "|rps", $4); push($2 "|" $3 "|p50", $5); push($2 "|" $3 "|p99", $6); push($2 "|" $3 "|cpu", $7) }
    FILENAME ~ /lg.tsv$/ { k = $2 "|" $3; push(k "|rps", $4); push(k "|p50", $5); push(k "|p99", $6); push(k "|p999", $7); push(k "|cpu", $8); push(k "|err", $9) }
    END {
        nt = split("redis twemproxy shardis-r shardis-b node", T, " ")
        split("redis-server|twemproxy|shardis→redis|shardis→builtin|builtin node", L, "|")
        ntest = split(order, TS, " "); nr = split(rates, R, " ")
        if (fmt == "md") {
            print "# shardis benchmark: " header
            print ""
            print "Targets: redis = one redis-server; twemproxy = nutcracker (md5/ketama, 1 server connection) over 10 redis-servers; shardis→redis = shardis proxy over the same 10 redis-servers; shardis→builtin = shardis proxy over 10 built-in nodes; builtin node = one built-in node."
            print ""
            print "## redis-benchmark throughput (requests/s, median)"
            print ""
            printf "`redis-benchmark -r %d --csv`, P1 = `-c 50 -P 1 -n %d`, P16 = `-c 50 -P 16 -n %d`, c1 = `-c 1 -P 1 -n %d`.\n\n", keyspace, np1, np16, nc1
            printf "| test |"; for (i = 1; i <= nt; i++) printf " %s |", L[i]; print " shardis/twemproxy | shardis/direct | node/redis |"
            printf "|---|"; for (i = 1; i <= nt; i++) printf "---:|"; print "---:|---:|---:|"
            for (s = 1; s <= ntest; s++) {
                printf "| %s |", TS[s]
                for (i = 1; i <= nt; i++) { m[i] = median(T[i] "|" TS[s] "|rps"); printf " %s |", fix(m[i], 0) }
                printf " %s | %s | %s |\n", ratio(m[3], m[2]), ratio(m[3], m[1]), ratio(m[5], m[1])
            }
            print ""
            print "## redis-benchmark latency (ms, p50 / p99) and server-process CPU per request (µs)"
            print ""
            print "CPU is utime+stime of the proxy process (twemproxy, shardis) or of the server (redis, builtin node), from /proc/PID/stat around each run, divided by its requests; resolution 10 ms per run."
            print ""
            printf "| test |"; for (i = 1; i <= nt; i++) printf " %s p50 / p99 | CPU |", L[i]; print ""
            printf "|---|"; for (i = 1; i <= nt; i++) printf "---:|---:|"; print ""
            for (s = 1; s <= ntest; s++) {
                printf "| %s |", TS[s]
                for (i = 1; i <= nt; i++) {
                    k = T[i] "|" TS[s]; a = median(k "|p50"); b = median(k "|p99")
                    printf " %s |", (a == "-") ? "-" : fix(a, 3) " / " fix(b, 3)
                    printf " %s |", fix(median(k "|cpu"), 2)
                }
                print ""
            }
            if (nr > 0 && rates != "") {
                print ""
                printf "## Open-loop GET 1 KB (shardis-load, %d connections, %d s after 1 s warm-up; latency µs from the intended send time, median)\n\n", lgc, lgs
                print "| rate | target | achieved rps | p50 | p99 | p99.9 | CPU µs/req | errors |"
                print "|---:|---|---:|---:|---:|---:|---:|---:|"
                for (r = 1; r <= nr; r++) for (i = 1; i <= nt; i++) {
                    k = T[i] "|" R[r]
                    if (!((k "|rps") in vals)) continue
                    printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", R[r], L[i], fix(median(k "|rps"), 0), fix(median(k "|p50"), 0), fix(median(k "|p99"), 0), fix(median(k "|p999"), 0), fix(median(k "|cpu"), 2), fix(median(k "|err"), 0)
                }
            }
            n = split(reasons, W, "\x1f")
            if (n > 1) { print ""; print "Not measured:"; for (i = 1; i < n; i++) print "- " W[i] }
        } else {
            printf "{\"header\":\"%s\",\"targets\":{", header
            for (i = 1; i <= nt; i++) printf "%s\"%s\":%s", (i > 1 ? "," : ""), T[i], (index(avail, " " T[i] "=1") ? "true" : "false")
            printf "},\"redis_benchmark\":["
            first = 1
            for (s = 1; s <= ntest; s++) for (i = 1; i <= nt; i++) {
                k = T[i] "|" TS[s]; if (!((k "|rps") in vals)) continue
                printf "%s{\"test\":\"%s\",\"target\":\"%s\",\"rps\":%s,\"p50_ms\":%s,\"p99_ms\":%s,\"cpu_us_per_req\":%s}", (first ? "" : ","), TS[s], T[i], jnum(median(k "|rps")), jnum(median(k "|p50")), jnum(median(k "|p99")), jnum(median(k "|cpu"))
                first = 0
            }
            printf "],\"load\":["
            first = 1
            for (r = 1; r <= nr; r++) for (i = 1; i <= nt; i++) {
                k = T[i] "|" R[r]; if (!((k "|rps") in vals)) continue
                printf "%s{\"rate\":%s,\"target\":\"%s\",\"rps\":%s,\"p50_us\":%s,\"p99_us\":%s,\"p999_us\":%s,\"cpu_us_per_req\":%s,\"errors\":%s}", (first ? "" : ","), R[r], T[i], jnum(median(k "|rps")), jnum(median(k "|p50")), jnum(median(k "|p99")), jnum(median(k "|p999")), jnum(median(k "|cpu")), jnum(median(k "|err"))
                first = 0
            }
            print "]}"
        }
    }' "$RB" "$LG"
}

echo >&2
if [ -n "$OUT" ]; then report md | tee "$OUT"; else report md; fi
[ -n "$JSON_OUT" ] && report json >"$JSON_OUT"
exit 0
