#!/usr/bin/env bash
# bench/type_memory.sh — bytes per stream entry and per geo member, one
# built-in node against one redis-server, each started (and stopped) by this
# script, one after the other (never both at once).
#
# On each server: samples `used_memory` (INFO memory) and RSS (VmRSS), writes
# N stream entries with `XADD events * type click user u<i> n <i>` (three
# fields, one stream), samples again, writes N geo members with
# `GEOADD places <lon> <lat> place:<i>` (spread over the globe), samples
# again. Bytes per entry = growth / N. Writes go through `redis-cli --pipe`.
#
# Ports: redis-server 17302, built-in node 18302.
#
# Usage: bench/type_memory.sh [--entries N] [--quick] [--out FILE.md] [--shardis PATH]
#   --entries N   stream entries and geo members written (default 1000000;
#                 --quick: 100000)
set -u -o pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
. "$HERE/lib.sh"
N=1000000
OUT=""
SHARDIS=""
REDIS_PORT=17302
NODE_PORT=18302
READY_TIMEOUT_DS=50

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --entries) N="$2"; shift 2 ;;
        --quick) N=100000; shift ;;
        --out) OUT="$2"; shift 2 ;;
        --shardis) SHARDIS="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "type_memory.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
case "$N" in ''|*[!0-9]*|0) echo "type_memory.sh: --entries needs a positive integer" >&2; exit 2 ;; esac
for tool in redis-server redis-cli awk; do
    command -v "$tool" >/dev/null || { echo "type_memory.sh: $tool not found" >&2; exit 1; }
done
if [ -z "$SHARDIS" ]; then
    SHARDIS="${CARGO_TARGET_DIR:-$REPO/target}/release/shardis"
fi
[ -x "$SHARDIS" ] || { echo "type_memory.sh: no shardis binary at $SHARDIS (cargo build --release)" >&2; exit 1; }

WORK="$(mktemp -d /tmp/shardis-typemem.XXXXXX)"
PID=""
stop() {
    [ -n "$PID" ] || return 0
    kill -TERM "$PID" 2>/dev/null
    local i
    for i in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null
    PID=""
}
trap 'stop; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

is_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in $REDIS_PORT $NODE_PORT; do
    if is_port_open "$p"; then
        echo "type_memory.sh: port $p is already in use; refusing to measure someone else's server" >&2
        exit 1
    fi
done


# The two write loads, RESP-encoded once and replayed on each server.
awk -v n="$N" 'BEGIN {
    for (i = 0; i < n; i++) {
        u = "u" (i % 1000); s = i ""
        printf "*9\r\n$4\r\nXADD\r\n$6\r\nevents\r\n$1\r\n*\r\n$4\r\ntype\r\n$5\r\nclick\r\n"
        printf "$4\r\nuser\r\n$%d\r\n%s\r\n$1\r\nn\r\n$%d\r\n%s\r\n", length(u), u, length(s), s
    }
}' >"$WORK/xadd.resp"
awk -v n="$N" 'BEGIN {
    srand(7)
    for (i = 0; i < n; i++) {
        lon = sprintf("%.6f", rand() * 359.9 - 179.95)
        lat = sprintf("%.6f", rand() * 170 - 85)
        m = "place:" i
        printf "*5\r\n$6\r\nGEOADD\r\n$6\r\nplaces\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", \
            length(lon), lon, length(lat), lat, length(m), m
    }
}' >"$WORK/geoadd.resp"

used_memory() { # PORT
    redis-cli -h 127.0.0.1 -p "$1" info memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'
}
rss() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$PID/status" 2>/dev/null; }
sample() { # PORT -> "used rss"
    sleep 1
    echo "$(used_memory "$1") $(rss)"
}

# measure NAME PORT: appends "name used0 rss0 used1 rss1 used2 rss2 len count" to $WORK/rows.
measure() {
    local name="$1" port="$2" s0 s1 s2 len card
    if ! wait_ready "$port" "$PID"; then
        echo "type_memory.sh: $name did not answer PING on $port: $(tail -n 3 "$WORK/$name.log" | tr '\n' ' ')" >&2
        echo "$name failed" >>"$WORK/rows"
        stop
        return
    fi
    s0="$(sample "$port")"
    redis-cli -h 127.0.0.1 -p "$port" --pipe <"$WORK/xadd.resp" >"$WORK/$name.xadd.log" 2>&1
    s1="$(sample "$port")"
    redis-cli -h 127.0.0.1 -p "$port" --pipe <"$WORK/geoadd.resp" >"$WORK/$name.geoadd.log" 2>&1
    s2="$(sample "$port")"
    len="$(redis-cli -h 127.0.0.1 -p "$port" xlen events)"
    card="$(redis-cli -h 127.0.0.1 -p "$port" zcard places)"
    echo "$name $s0 $s1 $s2 $len $card" >>"$WORK/rows"
    echo "type_memory.sh: $name: $len stream entries, $card geo members" >&2
    stop
}

: >"$WORK/rows"
echo "type_memory.sh: built-in node on $NODE_PORT, $N entries" >&2
"$SHARDIS" node --port "$NODE_PORT" >"$WORK/node.log" 2>&1 &
PID=$!
measure node "$NODE_PORT"
echo "type_memory.sh: redis-server on $REDIS_PORT, $N entries" >&2
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --protected-mode no --daemonize no --dir "$WORK" >"$WORK/redis.log" 2>&1 &
PID=$!
measure redis "$REDIS_PORT"

report() {
    echo "$N stream entries (\`XADD events * type click user u<i> n <i>\`, one stream) and then"
    echo "$N geo members (\`GEOADD places <lon> <lat> place:<i>\`, one key) written with"
    echo "\`redis-cli --pipe\` into one built-in node and then one redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')."
    echo "Bytes per entry = growth of \`used_memory\` (each server's own figure) or of RSS (\`VmRSS\`) / entries."
    echo
    echo "| | stream entry: used_memory B | stream entry: RSS B | geo member: used_memory B | geo member: RSS B | entries (XLEN / ZCARD) |"
    echo "|---|---:|---:|---:|---:|---:|"
    awk '
        $2 == "failed" { printf "| %s | did not start | | | | |\n", $1 == "node" ? "built-in node" : "redis-server"; next }
        {
            name = $1 == "node" ? "built-in node" : "redis-server"
            xs = ($8 > 0) ? $8 : 1; gs = ($9 > 0) ? $9 : 1
            su[$1] = ($4 - $2) / xs; sr[$1] = ($5 - $3) / xs
            gu[$1] = ($6 - $4) / gs; gr[$1] = ($7 - $5) / gs
            printf "| %s | %.0f | %.0f | %.0f | %.0f | %s / %s |\n", name, su[$1], sr[$1], gu[$1], gr[$1], $8, $9
        }
        END {
            if (("node" in su) && ("redis" in su) && su["redis"] > 0 && gu["redis"] > 0)
                printf "| node / redis | %.2f× | %.2f× | %.2f× | %.2f× | |\n", \
                    su["node"] / su["redis"], sr["node"] / (sr["redis"] > 0 ? sr["redis"] : 1), \
                    gu["node"] / gu["redis"], gr["node"] / (gr["redis"] > 0 ? gr["redis"] : 1)
        }' "$WORK/rows"
}

if [ -n "$OUT" ]; then report >"$OUT"; fi
report
