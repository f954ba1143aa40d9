#!/usr/bin/env bash
# bench/node_vs_redis.sh — redis-benchmark's default tests, one built-in node
# against one redis-server, side by side in one run: requests per second,
# median of --reps runs of each, and the node / redis ratio (goal ≥ 1.0×).
#
# Both servers run for the whole script (started and stopped by it) and are
# benchmarked alternately: every repetition runs the full test list on one,
# then on the other, the order swapped each repetition, each after a
# FLUSHALL, so machine noise spreads over both.
#
# Tests (redis-benchmark -t): PING (inline and multibulk), SET, GET, INCR,
# LPUSH, RPUSH, LPOP, RPOP, SADD, HSET, SPOP, ZADD, ZPOPMIN, LRANGE_100/300/
# 500/600, MSET (10 keys), XADD (run as a command where redis-benchmark
# predates its XADD test); -c 50 -P 1, default 3-byte values.
#
# Ports: redis-server 17303, built-in node 18303.
#
# Usage: bench/node_vs_redis.sh [--reps N] [--requests N] [--quick] [--out FILE.md]
#                               [--shardis PATH]
#   --requests N   redis-benchmark -n per test (default 100000; --quick 20000)
set -u -o pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
. "$HERE/lib.sh"
REPS=3
REQUESTS=100000
OUT=""
SHARDIS=""
REDIS_PORT=17303
NODE_PORT=18303
TESTS="ping,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange,mset,xadd"
RUN_TIMEOUT_S=600
READY_TIMEOUT_DS=50

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --reps) REPS="$2"; shift 2 ;;
        --requests) REQUESTS="$2"; shift 2 ;;
        --quick) REQUESTS=20000; shift ;;
        --out) OUT="$2"; shift 2 ;;
        --shardis) SHARDIS="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "node_vs_redis.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
for v in "$REPS" "$REQUESTS"; do
    case "$v" in ''|*[!0-9]*|0) echo "node_vs_redis.sh: --reps and --requests need positive integers" >&2; exit 2 ;; esac
done
for tool in redis-server redis-cli redis-benchmark awk; do
    command -v "$tool" >/dev/null || { echo "node_vs_redis.sh: $tool not found" >&2; exit 1; }
done
[ -n "$SHARDIS" ] || SHARDIS="${CARGO_TARGET_DIR:-$REPO/target}/release/shardis"
[ -x "$SHARDIS" ] || { echo "node_vs_redis.sh: no shardis binary at $SHARDIS (cargo build --release)" >&2; exit 1; }

WORK="$(mktemp -d /tmp/shardis-nvr.XXXXXX)"
PIDS=()
cleanup() {
    local pid i
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do
        for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

is_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in $REDIS_PORT $NODE_PORT; do
    if is_port_open "$p"; then
        echo "node_vs_redis.sh: port $p is already in use; refusing to benchmark someone else's server" >&2
        exit 1
    fi
done


redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --protected-mode no --daemonize no --dir "$WORK" >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
wait_ready "$REDIS_PORT" $! || { echo "node_vs_redis.sh: redis-server did not start: $(tail -n 3 "$WORK/redis.log")" >&2; exit 1; }
"$SHARDIS" node --port "$NODE_PORT" >"$WORK/node.log" 2>&1 &
PIDS+=($!)
wait_ready "$NODE_PORT" $! || { echo "node_vs_redis.sh: the node did not start: $(tail -n 3 "$WORK/node.log")" >&2; exit 1; }

# Rows of $WORK/rps.tsv: rep, target, test, rps.
: >"$WORK/rps.tsv"
run_one() { # REP TARGET PORT
    redis-cli -h 127.0.0.1 -p "$3" flushall >/dev/null
    if ! timeout "$RUN_TIMEOUT_S" redis-benchmark -h 127.0.0.1 -p "$3" -t "$TESTS" \
        -n "$REQUESTS" -c 50 -P 1 -r 100000 --csv >"$WORK/run.csv" 2>"$WORK/run.err"; then
        echo "node_vs_redis.sh: redis-benchmark on $2 failed: $(tail -n 3 "$WORK/run.err")" >&2
        return
    fi
    # redis-benchmark before 7.2 has no XADD test: run its command (7.2's
    # `XADD key * myfield <3-byte value>`) by hand then.
    if ! grep -q '^"XADD"' "$WORK/run.csv"; then
        timeout "$RUN_TIMEOUT_S" redis-benchmark -h 127.0.0.1 -p "$3" -n "$REQUESTS" -c 50 -P 1 \
            --csv XADD mystream '*' myfield xxx 2>>"$WORK/run.err" | tail -n +2 |
            sed 's/^"XADD [^"]*"/"XADD"/' >>"$WORK/run.csv"
    fi
    # "TEST","rps",...: the test name up to its first space or parenthesis.
    tr -d '\r' <"$WORK/run.csv" | awk -F'","' -v rep="$1" -v t="$2" '
        NR > 1 { name = $1; sub(/^"/, "", name); sub(/[ (].*/, "", name)
                 if (name == "LPUSH" && seen["LPUSH"]++) next
                 printf "%s\t%s\t%s\t%s\n", rep, t, name, $2 }' >>"$WORK/rps.tsv"
}

for rep in $(seq 1 "$REPS"); do
    if [ $((rep % 2)) = 1 ]; then order="redis node"; else order="node redis"; fi
    for t in $order; do
        port=$REDIS_PORT; [ "$t" = node ] && port=$NODE_PORT
        echo "node_vs_redis.sh: rep $rep/$REPS on $t ($REQUESTS requests per test)" >&2
        run_one "$rep" "$t" "$port"
    done
done

report() {
    echo "redis-benchmark \`-t $TESTS -n $REQUESTS -c 50 -P 1 -r 100000\` against one built-in node and one"
    echo "redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p'), alternately, a FLUSHALL before each run; requests per second,"
    echo "median of $REPS runs. Goal: node / redis ≥ 1.0× on every test."
    echo
    echo "| test | redis-server rps | built-in node rps | node / redis |"
    echo "|---|---:|---:|---:|"
    awk -F'\t' '
        function median(list,   a, n, i, j, x) {
            n = split(list, a, " ")
            for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > x + 0; j--) a[j + 1] = a[j]; a[j + 1] = x }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        { k = $3; if (!(k in order)) { order[k] = ++n; names[n] = k } v[$2, k] = v[$2, k] " " $4 }
        END {
            for (i = 1; i <= n; i++) {
                k = names[i]
                r = ((("redis", k) in v) ? median(v["redis", k]) : 0)
                b = ((("node", k) in v) ? median(v["node", k]) : 0)
                ratio = "–"
                if (r > 0) ratio = sprintf("%.2f×%s", b / r, (b < r) ? " **below**" : "")
                printf "| %s | %.0f | %.0f | %s |\n", k, r, b, ratio
            }
        }' "$WORK/rps.tsv"
}

if [ -n "$OUT" ]; then report >"$OUT"; fi
report
