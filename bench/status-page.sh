#!/usr/bin/env bash
# Regenerates the status-page screenshot the README shows.
#
#   bench/status-page.sh [--out bench/report/status-page.png] [--keys 200000] [--debug]
#
# Starts `shardis up` (6 nodes, admin API on an ephemeral loopback port),
# writes --keys keys, runs a GET load spread over the keyspace plus one client
# hammering a single key (so the hot-shard alarm and the hot-key list have
# something to show), starts adding a node with a copy rate limit (so a change
# is in progress), and takes a headless-Chromium screenshot of the admin
# listener's `/` at 1400x1000. Stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

OUT=bench/report/status-page.png KEYS=200000 PROFILE=release
while (($#)); do
  case "$1" in
    --debug) PROFILE=debug; shift ;;
    --out) OUT=$2; shift 2 ;;
    --keys) KEYS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
for tool in chromium redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 1; }
done

if [ "$PROFILE" = release ]; then cargo build --release --bins -q; else cargo build --bins -q; fi
BIN=target/$PROFILE/shardis

LOG=$(mktemp) CONF=$(mktemp --suffix .toml)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -f "$LOG" "$CONF"
}
trap cleanup EXIT

printf '[admin]\nlisten = "127.0.0.1:0"\n[migration]\nmax_keys_per_sec = 500\n' >"$CONF"
BASE=$(free_block 10)
PORT=$BASE
"$BIN" up --nodes 6 --port "$PORT" --first-node-port $((BASE + 1)) --config "$CONF" >"$LOG" 2>&1 &
PIDS+=($!)
for _ in $(seq 150); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$PORT" PING >/dev/null 2>&1 || { echo "shardis up did not start:" >&2; cat "$LOG" >&2; exit 1; }
ADMIN=$(redis-cli -p "$PORT" CLUSTER RINGINFO | tr -d '\r' | sed -n 's/^admin_listen://p')
[ -n "$ADMIN" ] && [ "$ADMIN" != "-" ] || { echo "no admin listener:" >&2; cat "$LOG" >&2; exit 1; }
echo "proxy 127.0.0.1:$PORT, admin http://$ADMIN/" >&2

redis-benchmark -p "$PORT" -t set -n "$KEYS" -r "$KEYS" -d 256 -P 16 -q >/dev/null
# Spread load, and one client on one key (`key:__rand_int__` without -r).
timeout 40 redis-benchmark -p "$PORT" -t get -n 100000000 -r "$KEYS" -c 6 -q >/dev/null 2>&1 &
PIDS+=($!)
timeout 40 redis-benchmark -p "$PORT" -t get -n 100000000 -c 6 -q >/dev/null 2>&1 &
PIDS+=($!)
sleep 4
redis-cli -p "$PORT" CLUSTER SPAWNNODE NAME node7 >/dev/null &
PIDS+=($!)
sleep 1
mkdir -p "$(dirname "$OUT")"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,1000 \
  --virtual-time-budget=3000 --screenshot="$OUT" "http://$ADMIN/" 2>/dev/null
echo "wrote $OUT" >&2
