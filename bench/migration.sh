#!/usr/bin/env bash
# Migration speed and the client-throughput dip during a topology change.
#
#   bench/migration.sh [--keys 1000000] [--value-size 1024] [--nodes 10] [--copy-rates 0,20000] [--out FILE.md]
#
# Starts `shardis up` (release build) on free loopback ports, writes --keys keys
# of --value-size bytes through the proxy, measures GET throughput (closed loop,
# 50 connections) before the change, then grows the cluster by one node
# (CLUSTER SPAWNNODE) while the same load runs in 1-second slices, verifying
# every GET value; then removes a node the same way. Prints keys copied, copy
# rate (keys/s, MB/s), cutover pause, throughput before/during and the ratio,
# and misses/verify failures (must be 0), once per copy rate limit
# (`[migration] max_keys_per_sec`, 0 = unlimited). Stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."

KEYS=1000000 SIZE=1024 NODES=10 OUT="" RATES="0,20000"
while (($#)); do
  case "$1" in
    --keys) KEYS=$2; shift 2 ;;
    --value-size) SIZE=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --copy-rates) RATES=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

cargo build --release --bins -q
BIN=target/release/shardis
LOAD=target/release/shardis-load

free_block() { # a base port with $1 free consecutive ports above it
  # Below the kernel's ephemeral range (32768-60999 here): a port in it may
  # be the local end of some connection (the load generator's 50), which no
  # listener can then bind however free a connect probe finds it.
  for base in $(seq $((21000 + RANDOM % 500)) 500 32000); do
    local ok=1
    for p in $(seq "$base" $((base + $1))); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then ok=0; break; fi
    done
    ((ok)) && { echo "$base"; return; }
  done
  echo "no free ports" >&2; exit 1
}
LOG=$(mktemp) CONF=$(mktemp --suffix .toml)
UP=""
stop_up() { [ -n "$UP" ] && { kill -TERM "$UP" 2>/dev/null; wait "$UP" 2>/dev/null || true; }; UP=""; }
trap 'stop_up; rm -f "$LOG" "$CONF"' EXIT

start_up() { # $1 = copy rate limit
  printf '[migration]\nmax_keys_per_sec = %s\n' "$1" >"$CONF"
  # Fresh ports for every cluster: the previous one's may still be closing.
  BASE=$(free_block $((NODES + 4)))
  PORT=$BASE FIRST=$((BASE + 1))
  "$BIN" up --nodes "$NODES" --port "$PORT" --first-node-port "$FIRST" --config "$CONF" >"$LOG" 2>&1 &
  UP=$!
  for _ in $(seq 150); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && break; sleep 0.1; done
  if ! redis-cli -p "$PORT" PING >/dev/null 2>&1; then
    echo "shardis up did not start:" >&2; cat "$LOG" >&2; exit 1
  fi
  echo "writing $KEYS keys of $SIZE B ..." >&2
  "$LOAD" --addr "127.0.0.1:$PORT" --workload set --keys "$KEYS" -d "$SIZE" --preload -n 1 --duration 1s --json >/dev/null
}

info() { redis-cli -p "$PORT" CLUSTER RINGINFO | tr -d '\r' | awk -F: -v k="$1" '$1==k {print $2}'; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

load_slice() { "$LOAD" --addr "127.0.0.1:$PORT" --workload get --keys "$KEYS" -d "$SIZE" -c 50 --verify --duration "$1" --json 2>/dev/null || true; }

change() { # $1 = label, rest = CLUSTER args
  local label=$1; shift
  redis-cli -p "$PORT" CLUSTER "$@" >/dev/null
  local slices=() misses=0 errors=0 bad=0
  for _ in $(seq 600); do
    local j; j=$(load_slice 1s)
    slices+=("$(echo "$j" | field rps)")
    misses=$((misses + $(echo "$j" | field misses)))
    errors=$((errors + $(echo "$j" | field errors)))
    bad=$((bad + $(echo "$j" | field verify_failures)))
    [ "$(info state)" = ok ] && break
  done
  local copied ms pause rebuild
  copied=$(info migration_keys_copied); ms=$(info migration_ms); pause=$(info migration_cutover_pause_ms); rebuild=$(info ring_rebuild_us)
  local during; during=$(printf '%s\n' "${slices[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  python3 - "$label" "$copied" "$ms" "$pause" "$rebuild" "$during" "$RPS_BEFORE" "$SIZE" "$KEYS" "$misses" "$errors" "$bad" <<'PY'
import sys
label, copied, ms, pause, rebuild, during, before, size, keys, misses, errors, bad = sys.argv[1:]
copied, ms, during, before, size, keys = int(copied), max(int(ms), 1), float(during), float(before), int(size), int(keys)
print(f"| {label} | {copied:,} ({copied / keys * 100:.2f}%) | {ms / 1000:.2f} s | {copied / ms * 1000:,.0f} | {copied * size / (ms / 1000) / 1e6:.1f} | {pause} ms | {rebuild} µs | {before:,.0f} | {during:,.0f} | {during / before:.2f} | {misses} / {errors} / {bad} |")
PY
}

{
  echo "Migration with $NODES built-in nodes, $KEYS keys of $SIZE B; GET load during the change: 50 connections, closed loop, every value verified."
  echo
  echo "| copy rate limit | change | keys copied | duration | keys/s | MB/s | cutover pause | ring rebuild | GET rps before | GET rps during (median of 1 s slices) | during/before | misses / errors / bad values |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  for rate in ${RATES//,/ }; do
    start_up "$rate"
    RPS_BEFORE=$(load_slice 5s | field rps)
    label=$([ "$rate" = 0 ] && echo unlimited || echo "$rate keys/s")
    change "$label | add node $((NODES + 1))" SPAWNNODE
    change "$label | remove node3" REMOVENODE node3
    stop_up
  done
  echo
  echo "Generated by \`bench/migration.sh --keys $KEYS --value-size $SIZE --nodes $NODES --copy-rates $RATES\` on $(date -u +%Y-%m-%d), $(nproc) cores."
} | tee ${OUT:+"$OUT"}
