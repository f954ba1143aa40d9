#!/usr/bin/env bash
# Throughput of a fleet of proxies sharing their topology in etcd, with 1, 2
# and 3 proxies in one run, and the CPU each proxy spends per request.
#
#   bench/fleet.sh [--quick] [--duration 5] [--connections 25] [--pipeline 1]
#                  [--workload mixed:80] [--shardis BIN] [--load BIN] [--out FILE.md]
#
# Starts etcd, 3 built-in nodes and 3 `shardis proxy` processes sharing the
# topology (`[topology] store = "etcd"`) on free loopback ports. For N = 1, 2, 3
# it runs one shardis-load per proxy against the first N proxies at once
# (closed loop, each with the same connections and pipeline, no warm-up: the
# CPU read from /proc/PID/stat covers exactly the requests counted) and
# prints a Markdown table: total replies/s, each proxy's replies/s and its
# CPU µs per request. Every run is bounded by --duration; everything it
# started is stopped by PID on the way out. Needs etcd (Debian: etcd-server).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

DURATION=5 CONNS=25 PIPE=1 WORKLOAD=mixed:80 OUT="" BIN="" LOAD=""
while (($#)); do
  case "$1" in
    --quick) DURATION=2; shift ;;
    --duration) DURATION=$2; shift 2 ;;
    --connections) CONNS=$2; shift 2 ;;
    --pipeline) PIPE=$2; shift 2 ;;
    --workload) WORKLOAD=$2; shift 2 ;;
    --shardis) BIN=$2; shift 2 ;;
    --load) LOAD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v etcd >/dev/null || { echo "bench/fleet.sh: etcd is not installed (Debian package etcd-server)" >&2; exit 1; }
if [ -z "$BIN" ] || [ -z "$LOAD" ]; then
  cargo build --release --bins -q
  BIN=${BIN:-target/release/shardis} LOAD=${LOAD:-target/release/shardis-load}
fi
BIN=$(realpath "$BIN") LOAD=$(realpath "$LOAD")

WORK=$(mktemp -d)
PIDS=()
stop_all() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
trap 'stop_all; rm -rf "$WORK"' EXIT

BASE=$(free_block 10)
ETCD=$BASE NODE0=$((BASE + 2)) PROXY0=$((BASE + 5))
etcd --name bench --data-dir "$WORK/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD" --advertise-client-urls "http://127.0.0.1:$ETCD" \
  --listen-peer-urls "http://127.0.0.1:$((ETCD + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD + 1))" \
  --initial-cluster "bench=http://127.0.0.1:$((ETCD + 1))" --log-level error >"$WORK/etcd.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$ETCD") 2>/dev/null && break; sleep 0.1; done

NODES=""
for i in 0 1 2; do
  "$BIN" node --port $((NODE0 + i)) >"$WORK/node$i.log" 2>&1 &
  PIDS+=($!)
  wait_ready $((NODE0 + i)) "$!" || { echo "node $i did not start" >&2; exit 1; }
  printf -v NODES '%s[[nodes]]\naddr = "127.0.0.1:%s"\nname = "node%s"\n\n' "$NODES" $((NODE0 + i)) $((i + 1))
done
PROXY_PIDS=()
for i in 0 1 2; do
  printf '[proxy]\nlisten = "127.0.0.1:%s"\n\n[topology]\nstore = "etcd"\nendpoints = ["127.0.0.1:%s"]\nprefix = "/bench"\n\n%s' \
    $((PROXY0 + i)) "$ETCD" "$NODES" >"$WORK/proxy$i.toml"
  "$BIN" proxy --config "$WORK/proxy$i.toml" >"$WORK/proxy$i.log" 2>&1 &
  PIDS+=($!) PROXY_PIDS+=($!)
  wait_ready $((PROXY0 + i)) "$!" || { echo "proxy $i did not start:" >&2; cat "$WORK/proxy$i.log" >&2; exit 1; }
done
"$LOAD" --addr "127.0.0.1:$PROXY0" --workload set -d 100 --keys 10000 -c 4 --preload \
  --duration 1s --json >/dev/null 2>&1

# cpu_ticks PID : utime + stime of the process, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

{
  echo "Closed-loop $WORKLOAD (100 B values, 10 000 keys) through N of 3 proxies sharing their topology in etcd, over 3 built-in nodes; one shardis-load per proxy ($CONNS connections, pipeline $PIPE), $DURATION s each, all on one machine ($(nproc) cores)."
  echo
  echo "| proxies | total replies/s | replies/s per proxy | CPU µs per request per proxy | errors |"
  echo "|---|---|---|---|---|"
  for n in 1 2 3; do
    echo "bench/fleet.sh: $n proxies" >&2
    before=() loads=()
    for i in $(seq 0 $((n - 1))); do before+=("$(cpu_ticks "${PROXY_PIDS[$i]}")"); done
    for i in $(seq 0 $((n - 1))); do
      "$LOAD" --addr "127.0.0.1:$((PROXY0 + i))" --workload "$WORKLOAD" -d 100 --keys 10000 \
        -c "$CONNS" -P "$PIPE" --duration "${DURATION}s" --json >"$WORK/load$n-$i.json" 2>/dev/null &
      loads+=($!)
    done
    for p in "${loads[@]}"; do wait "$p"; done
    python3 - "$n" "$TICK" "$WORK" "${before[@]}" "$(for i in $(seq 0 $((n - 1))); do cpu_ticks "${PROXY_PIDS[$i]}"; done | tr '\n' ' ')" <<'PY'
import json, sys
n, tick, work = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
before = [int(x) for x in sys.argv[4:4 + n]]
after = [int(x) for x in sys.argv[4 + n].split()]
runs = [json.load(open(f"{work}/load{n}-{i}.json")) for i in range(n)]
rps = [r["rps"] for r in runs]
cpu = [(a - b) / tick * 1e6 / max(r["replies"], 1) for a, b, r in zip(after, before, runs)]
errors = sum(r["errors"] for r in runs)
print(f"| {n} | {sum(rps):,.0f} | {' / '.join(f'{x:,.0f}' for x in rps)} | {' / '.join(f'{x:.1f}' for x in cpu)} | {errors} |")
PY
  done
  echo
  echo "Generated by \`bench/fleet.sh --duration $DURATION --connections $CONNS --pipeline $PIPE --workload $WORKLOAD\` on $(date -u +%Y-%m-%d). The load generators share the machine with the proxies and nodes: on a small machine the total is bounded by its cores, not by the fleet."
} | tee ${OUT:+"$OUT"}
