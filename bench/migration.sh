#!/usr/bin/env bash
# Migration speed and the client-throughput dip during a topology change.
#
#   bench/migration.sh [--keys 1000000] [--value-size 1024] [--nodes 10] [--copy-rates 0,20000,adaptive] [--out FILE.md]
#
# Starts `shardis up` (release build) on free loopback ports, writes --keys keys
# of --value-size bytes through the proxy, measures GET throughput (closed loop,
# 50 connections) before the change, then grows the cluster by one node
# (CLUSTER SPAWNNODE) while the same load runs in 1-second slices, verifying
# every GET value; then removes a node the same way. Prints keys copied, copy
# rate (keys/s, MB/s), cutover pause, throughput before/during and the ratio,
# and misses/verify failures (must be 0), once per copy rate: a number is a
# fixed `[migration] max_keys_per_sec` (0 = unlimited, both with
# `copy_rate = "unlimited"`), `adaptive` is `copy_rate = "adaptive"` with no
# cap; each change's duration is also given against the unlimited run's.
# Stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

KEYS=1000000 SIZE=1024 NODES=10 OUT="" RATES="0,20000,adaptive"
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

LOG=$(mktemp) CONF=$(mktemp --suffix .toml)
UP=""
stop_up() { [ -n "$UP" ] && { kill -TERM "$UP" 2>/dev/null; wait "$UP" 2>/dev/null || true; }; UP=""; }
trap 'stop_up; rm -f "$LOG" "$CONF"' EXIT

start_up() { # $1 = a fixed copy rate (0 = unlimited) or "adaptive"
  if [ "$1" = adaptive ]; then
    printf '[migration]\ncopy_rate = "adaptive"\n' >"$CONF"
  else
    printf '[migration]\ncopy_rate = "unlimited"\nmax_keys_per_sec = %s\n' "$1" >"$CONF"
  fi
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

declare -A UNLIMITED_MS=()
change() { # $1 = label, $2 = which change (add/remove), rest = CLUSTER args
  local label=$1 kind=$2; shift 2
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
  local copied ms pause rebuild pace
  copied=$(info migration_keys_copied); ms=$(info migration_ms); pause=$(info migration_cutover_pause_ms); rebuild=$(info ring_rebuild_us)
  pace="$(info migration_copy_rate_mode), last $(info migration_copy_rate_keys_per_sec)"
  [ "$RATE" = 0 ] && UNLIMITED_MS[$kind]=$ms
  local during; during=$(printf '%s\n' "${slices[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  python3 - "$label" "$copied" "$ms" "$pause" "$rebuild" "$during" "$RPS_BEFORE" "$SIZE" "$KEYS" "$misses" "$errors" "$bad" "$pace" "${UNLIMITED_MS[$kind]:-0}" <<'PY'
import sys
label, copied, ms, pause, rebuild, during, before, size, keys, misses, errors, bad, pace, unl = sys.argv[1:]
copied, ms, during, before, size, keys, unl = int(copied), max(int(ms), 1), float(during), float(before), int(size), int(keys), int(unl)
vs = f"{ms / unl:.2f}×" if unl > 0 else "-"
print(f"| {label} | {copied:,} ({copied / keys * 100:.2f}%) | {ms / 1000:.2f} s | {vs} | {copied / ms * 1000:,.0f} | {copied * size / (ms / 1000) / 1e6:.1f} | {pace} | {pause} ms | {rebuild} µs | {before:,.0f} | {during:,.0f} | {during / before:.2f} | {misses} / {errors} / {bad} |")
PY
}

{
  echo "Migration with $NODES built-in nodes, $KEYS keys of $SIZE B; GET load during the change: 50 connections, closed loop, every value verified."
  echo
  echo "| copy rate | change | keys copied | duration | duration vs unlimited | keys/s | MB/s | pace (mode, last keys/s) | cutover pause | ring rebuild | GET rps before | GET rps during (median of 1 s slices) | during/before | misses / errors / bad values |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for RATE in ${RATES//,/ }; do
    start_up "$RATE"
    RPS_BEFORE=$(load_slice 5s | field rps)
    case "$RATE" in
      0) label=unlimited ;;
      adaptive) label=adaptive ;;
      *) label="$RATE keys/s" ;;
    esac
    change "$label | add node $((NODES + 1))" add SPAWNNODE
    change "$label | remove node3" remove REMOVENODE node3
    stop_up
  done
  echo
  echo "Generated by \`bench/migration.sh --keys $KEYS --value-size $SIZE --nodes $NODES --copy-rates $RATES\` on $(date -u +%Y-%m-%d), $(nproc) cores."
} | tee ${OUT:+"$OUT"}
