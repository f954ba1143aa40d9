#!/usr/bin/env bash
# bench/instructions.sh — user-space instructions per request of each proxy
# (and of redis-server itself), counted by valgrind's callgrind: a count, not
# a time, so it is the same on a loaded 2-core machine as on an idle one, and
# two builds compare exactly. Kernel work (system calls, wake-ups) is not in
# it; bench/cost.sh measures that as CPU time and --strace counts the calls.
#
# Usage: bench/instructions.sh [-n 20000] [-t get,set] [-d 100] [-c 1] [-P 1]
#                              [--shardis PATH] [--out FILE] [--keep]
#
# Targets, each measured process alone under callgrind, its backends native:
#   redis         one redis-server
#   twemproxy     nutcracker (md5/ketama, 1 server connection) over 10 redis-servers
#   shardis→redis shardis proxy over the same 10 redis-servers
#   shardis→builtin shardis proxy over 10 built-in nodes
#   builtin node  one built-in node
# Per target and test: counters zeroed after a warm-up of 500 requests, then
# redis-benchmark -c C -P P -n N -r 100000 -d D; the dump's total divided by
# N. For the shardis proxies the count is also split by where the code lives
# (tokio, std and libc, shardis, other crates), from callgrind_annotate.
set -u -o pipefail

N=20000 TESTS=get,set D=100 C=1 PL=1 SHARDIS="" OUT="" KEEP=0
while [ $# -gt 0 ]; do
    case "$1" in
        -n) N="$2"; shift 2 ;;
        -t) TESTS="$2"; shift 2 ;;
        -d) D="$2"; shift 2 ;;
        -c) C="$2"; shift 2 ;;
        -P) PL="$2"; shift 2 ;;
        --shardis) SHARDIS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "instructions.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
REPO="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=bench/lib.sh
. "$REPO/bench/lib.sh"
for tool in valgrind callgrind_control python3 redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null || { echo "instructions.sh: $tool not found" >&2; exit 1; }
done
NUTCRACKER="$(command -v nutcracker || { [ -x /usr/sbin/nutcracker ] && echo /usr/sbin/nutcracker; } || true)"
[ -n "$SHARDIS" ] || SHARDIS="${CARGO_TARGET_DIR:-$REPO/target}/release/shardis"
[ -x "$SHARDIS" ] || { echo "instructions.sh: no $SHARDIS (cargo build --release, or --shardis PATH)" >&2; exit 1; }

WORK="$(mktemp -d /tmp/shardis-instr.XXXXXX)"
PIDS=()
cleanup() {
    local pid i
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do
        for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
    done
    wait 2>/dev/null
    if [ "$KEEP" = 1 ]; then echo "instructions.sh: files kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CMD... : CMD in the background, logged to $WORK/NAME.log; sets LAST_PID.
start() {
    local name="$1"; shift
    "$@" >"$WORK/$name.log" 2>&1 &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}
start_redis() { start "redis-$1" redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --dir "$WORK"; }

BASE="$(free_block 40)"
R_PORT=$BASE TW_PORT=$((BASE + 1)) SR_PORT=$((BASE + 2)) SB_PORT=$((BASE + 3)) NODE_PORT=$((BASE + 4))
REDIS_PORTS=$(seq $((BASE + 10)) $((BASE + 19)))
NODE_PORTS=$(seq $((BASE + 20)) $((BASE + 29)))
for p in $REDIS_PORTS; do start_redis "$p"; wait_ready "$p" "$LAST_PID" || { echo "instructions.sh: redis-server on $p did not start" >&2; exit 1; }; done
for p in $NODE_PORTS; do start "node-$p" "$SHARDIS" node --port "$p"; wait_ready "$p" "$LAST_PID" || { echo "instructions.sh: node on $p did not start" >&2; exit 1; }; done

proxy_config() { # FILE LISTEN PORTS...
    local file="$1" listen="$2" i=1 p; shift 2
    { echo "[proxy]"; echo "listen = \"127.0.0.1:$listen\""
      for p in "$@"; do echo "[[nodes]]"; echo "addr = \"127.0.0.1:$p\""; echo "name = \"node$i\""; i=$((i + 1)); done
    } >"$file"
}
proxy_config "$WORK/shardis-r.toml" "$SR_PORT" $REDIS_PORTS
proxy_config "$WORK/shardis-b.toml" "$SB_PORT" $NODE_PORTS
{ echo "bench:"; echo "  listen: 127.0.0.1:$TW_PORT"; echo "  hash: md5"; echo "  distribution: ketama"
  echo "  hash_tag: \"{}\""; echo "  redis: true"; echo "  server_connections: 1"; echo "  servers:"
  i=1; for p in $REDIS_PORTS; do echo "   - 127.0.0.1:$p:1 node$i"; i=$((i + 1)); done
} >"$WORK/twemproxy.yml"

# under_callgrind NAME PORT CMD... : starts CMD under callgrind, waits for PING; sets CG_PID.
under_callgrind() {
    local name="$1" port="$2" i; shift 2
    start "$name" valgrind --tool=callgrind --compress-strings=no --callgrind-out-file="$WORK/cg.$name.%p" "$@"
    CG_PID=""
    # valgrind's launcher may run the tool as a process of its own.
    for i in $(seq 1 300); do
        CG_PID="$(pgrep -f -- "--callgrind-out-file=$WORK/cg\\.$name\\." | head -1)"
        [ -n "$CG_PID" ] && [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    echo "instructions.sh: $name did not answer PING under callgrind: $(tail -n 3 "$WORK/$name.log" | tr '\n' ' ')" >&2
    return 1
}

# area_split DUMP : "tokio std+libc shardis other" instructions per request:
# each function's own cost (not what it calls) by the source file of the
# line, so std's generic code inlined into the proxy counts as std.
# Read from the dump itself: callgrind_annotate 3.19 misreads the self
# costs of a dump taken after zeroing, and names are written uncompressed
# (--compress-strings=no) because a later dump would refer to names only
# an earlier dump defined.
area_split() {
    python3 - "$1" "$N" <<'PY'
import re, sys
names, cur, skip, s = {}, "", False, {"tokio": 0, "std": 0, "shardis": 0, "other": 0}
def name(v):
    m = re.match(r"\((\d+)\)(?: (.*))?", v)
    if not m:
        return v
    if m.group(2):
        names[m.group(1)] = m.group(2)
    return names.get(m.group(1), v)
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line[:3] in ("fl=", "fi=", "fe="):
        cur = name(line[3:])
    elif line.startswith("calls="):
        skip = True  # the next cost line is the call's inclusive cost
    elif line[:1].isdigit() or line[:1] in "+-*":
        parts = line.split()
        if len(parts) < 2:
            continue
        if skip:
            skip = False
            continue
        if re.search(r"tokio-[0-9]", cur):
            area = "tokio"
        elif re.search(r"/rustc/|glibc|malloc|libc|csu/|sysdeps|string/|nptl|elf/", cur):
            area = "std"
        elif "/src/" in cur and "/registry/" not in cur:
            area = "shardis"
        else:
            area = "other"
        s[area] += int(parts[1])
n = int(sys.argv[2])
print(" ".join(str(round(s[a] / n)) for a in ("tokio", "std", "shardis", "other")))
PY
}

# measure NAME PORT TEST : one counted run; prints "instructions/request [split]".
measure() {
    local name="$1" port="$2" test="$3" dump before
    redis-benchmark -p "$port" -c 1 -n 500 -t "$test" -d "$D" -r 100000 -q >/dev/null 2>&1
    callgrind_control -z "$CG_PID" >/dev/null 2>&1 || return 1
    timeout 600 redis-benchmark -p "$port" -c "$C" -P "$PL" -n "$N" -t "$test" -d "$D" -r 100000 -q >/dev/null 2>&1 || return 1
    before="$(ls "$WORK"/cg."$name".*.* 2>/dev/null | wc -l)"
    callgrind_control -d "$CG_PID" >/dev/null 2>&1 || return 1
    dump="$(ls -t "$WORK"/cg."$name".*.* 2>/dev/null | head -1)"
    [ -n "$dump" ] && [ "$(ls "$WORK"/cg."$name".*.* | wc -l)" -gt "$before" ] || return 1
    awk -v n="$N" '/^summary:/ { printf "%.0f", $2 / n }' "$dump"
    case "$name" in shardis-*) echo " $(area_split "$dump")" ;; *) echo ;; esac
}

declare -A RESULT
IFS=, read -r -a TEST_LIST <<<"$TESTS"
run_target() { # NAME PORT CMD...
    local name="$1" port="$2" t; shift 2
    echo "instructions.sh: $name under callgrind" >&2
    under_callgrind "$name" "$port" "$@" || { for t in "${TEST_LIST[@]}"; do RESULT[$name,$t]="-"; done; return; }
    for t in "${TEST_LIST[@]}"; do
        RESULT[$name,$t]="$(measure "$name" "$port" "$t" || echo -)"
    done
    kill -TERM "$CG_PID" 2>/dev/null
}
run_target redis "$R_PORT" redis-server --port "$R_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --dir "$WORK"
if [ -n "$NUTCRACKER" ]; then
    run_target twemproxy "$TW_PORT" "$NUTCRACKER" -c "$WORK/twemproxy.yml" -s $((BASE + 5)) -a 127.0.0.1
else
    echo "instructions.sh: nutcracker not installed; no twemproxy row" >&2
fi
run_target shardis-r "$SR_PORT" "$SHARDIS" proxy --config "$WORK/shardis-r.toml"
run_target shardis-b "$SB_PORT" "$SHARDIS" proxy --config "$WORK/shardis-b.toml"
run_target node "$NODE_PORT" "$SHARDIS" node --port "$NODE_PORT"

label() { case "$1" in redis) echo "redis-server" ;; twemproxy) echo "twemproxy" ;; shardis-r) echo "shardis→redis" ;; shardis-b) echo "shardis→builtin" ;; node) echo "builtin node" ;; esac; }
report() {
    local t name v tw total
    echo "User-space instructions per request (valgrind callgrind; redis-benchmark -c $C -P $PL -n $N -d $D -r 100000;"
    echo "counters zeroed after a 500-request warm-up). shardis $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%Y-%m-%d)."
    echo
    echo "| test | target | instructions / request | vs twemproxy | tokio | std + libc | shardis | other crates |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    for t in "${TEST_LIST[@]}"; do
        tw="${RESULT[twemproxy,$t]:--}"; tw="${tw%% *}"
        for name in redis twemproxy shardis-r shardis-b node; do
            v="${RESULT[$name,$t]:--}"
            [ "$name" = twemproxy ] && [ -z "$NUTCRACKER" ] && continue
            read -r total tk sd sh ot <<<"$v"
            local ratio="-"
            [ "$total" != "-" ] && [ "$tw" != "-" ] && ratio="$(awk -v a="$total" -v b="$tw" 'BEGIN { printf "%.2f×", a / b }')"
            echo "| ${t^^} | $(label "$name") | $total | $ratio | ${tk:-} | ${sd:-} | ${sh:-} | ${ot:-} |"
        done
    done
}
if [ -n "$OUT" ]; then report | tee "$OUT"; else report; fi
