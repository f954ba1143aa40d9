#!/usr/bin/env bash
# bench/cost.sh — what a running proxy (or server) spends per request, in
# measures that other load on the machine does not distort much: CPU time
# (utime and stime), context switches and, with --strace, system calls, each
# divided by a fixed number of requests that redis-benchmark sends.
#
# Usage: bench/cost.sh --pid PID --port PORT [-n 20000] [-c 1] [-P 1] [-t get] [-d 100] [--strace] [--reps 3]
#
#   --pid      the process to measure (shardis proxy, nutcracker, redis-server)
#   --port     where redis-benchmark sends its requests (loopback)
#   --strace   a further run under `strace -c -f`: system calls per request by name
#              (strace slows the process, so its CPU figures are not used)
#
# One line per repetition: CPU µs per request from the scheduler's own
# accounting (/proc/PID/task/*/schedstat, ns, every thread), user and system
# µs per request (/proc/PID/stat, clock ticks), voluntary and involuntary
# context switches per request (every thread), and redis-benchmark's rps.
# Nothing is started or stopped but redis-benchmark and strace themselves.
set -u -o pipefail

PID="" PORT="" N=20000 C=1 PL=1 OP=get D=100 STRACE=0 REPS=3
while [ $# -gt 0 ]; do
    case "$1" in
        --pid) PID="$2"; shift 2 ;;
        --port) PORT="$2"; shift 2 ;;
        -n) N="$2"; shift 2 ;;
        -c) C="$2"; shift 2 ;;
        -P) PL="$2"; shift 2 ;;
        -t) OP="$2"; shift 2 ;;
        -d) D="$2"; shift 2 ;;
        --reps) REPS="$2"; shift 2 ;;
        --strace) STRACE=1; shift ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "cost.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ -n "$PID" ] && [ -n "$PORT" ] || { echo "cost.sh: --pid and --port are required" >&2; exit 2; }
kill -0 "$PID" 2>/dev/null || { echo "cost.sh: no process $PID" >&2; exit 1; }
TCK="$(getconf CLK_TCK)"

# threads_sum FIELD : the sum over PID's threads of one counter.
threads_sum() {
    local t s=0 v
    for t in /proc/"$PID"/task/*; do
        case "$1" in
            run) v=$(cut -d' ' -f1 "$t/schedstat" 2>/dev/null) ;;
            vcs) v=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null) ;;
            ncs) v=$(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null) ;;
        esac
        s=$((s + ${v:-0}))
    done
    echo "$s"
}
# ticks : "utime stime" of PID (all threads) in clock ticks.
ticks() { sed 's/^.*) //' "/proc/$PID/stat" | awk '{print $12, $13}'; }

bench() {
    redis-benchmark -h 127.0.0.1 -p "$PORT" -c "$C" -P "$PL" -n "$N" -r 100000 -d "$D" -t "$OP" --csv 2>/dev/null |
        grep -i "^\"$OP\"" | cut -d, -f2 | tr -d '"'
}

echo "cost.sh: pid $PID port $PORT: -c $C -P $PL -n $N -t $OP -d $D; per request:"
for rep in $(seq 1 "$REPS"); do
    r0=$(threads_sum run) v0=$(threads_sum vcs) n0=$(threads_sum ncs)
    read -r u0 s0 < <(ticks)
    rps=$(bench)
    r1=$(threads_sum run) v1=$(threads_sum vcs) n1=$(threads_sum ncs)
    read -r u1 s1 < <(ticks)
    awk -v r=$((r1 - r0)) -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v v=$((v1 - v0)) -v nv=$((n1 - n0)) \
        -v n="$N" -v tck="$TCK" -v rps="${rps:-?}" -v rep="$rep" 'BEGIN {
        printf "  rep %d: cpu %.2f µs (user %.2f, sys %.2f), ctx switches %.3f voluntary + %.3f involuntary, %s rps\n",
            rep, r / 1000 / n, u * 1e6 / tck / n, s * 1e6 / tck / n, v / n, nv / n, rps }'
done

if [ "$STRACE" = 1 ]; then
    out="$(mktemp /tmp/shardis-cost.XXXXXX)"
    strace -c -f -q -p "$PID" -o "$out" &
    spid=$!
    sleep 1
    bench >/dev/null
    kill -INT "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    echo "  system calls per request (strace -c -f):"
    awk -v n="$N" '$1 ~ /^[0-9.]+$/ && $NF != "total" { c[$NF] = $4; tot += $4 }
        END { for (k in c) if (c[k] / n >= 0.01) printf "    %-16s %.2f\n", k, c[k] / n; printf "    %-16s %.2f\n", "all", tot / n }' "$out" | sort -k2 -nr
    rm -f "$out"
fi
