#!/usr/bin/env bash
# bench/tls.sh — what TLS costs, side by side in one run: redis-benchmark
# SET and GET at P1 and P16 (-c 50, -d 100) against
#   plain        shardis proxy, plaintext port        127.0.0.1:17402
#   tls          shardis proxy, TLS port ([tls])      127.0.0.1:17403
#   redis-tls    redis-server's own TLS port directly 127.0.0.1:17401
# The proxy forwards to that same redis-server over plaintext (port 17400).
# Each figure is the median requests/s of --reps runs; targets are
# interleaved within each repetition so machine noise spreads over all.
# Certificates are made in a temp dir with the openssl command (the proxy
# itself links no OpenSSL) and removed at the end.
#
# Usage: bench/tls.sh [--reps N] [--requests N] [--shardis PATH] [--out FILE.md]
set -u -o pipefail

REPS=3
REQUESTS=200000
OUT=""
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
SHARDIS="$REPO/target/release/shardis"

while [ $# -gt 0 ]; do
    case "$1" in
        --reps) REPS="$2"; shift 2 ;;
        --requests) REQUESTS="$2"; shift 2 ;;
        --shardis) SHARDIS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done

for tool in redis-server redis-benchmark openssl; do
    command -v "$tool" >/dev/null || { echo "bench/tls.sh needs $tool" >&2; exit 1; }
done
if [ ! -x "$SHARDIS" ]; then
    (cd "$REPO" && cargo build --release --bin shardis) || exit 1
fi

DIR="$(mktemp -d)"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT

# A CA and a certificate for 127.0.0.1 / localhost that it signed.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=bench-ca" \
    -keyout "$DIR/ca.key" -out "$DIR/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
    -keyout "$DIR/server.key" -out "$DIR/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$DIR/san.ext"
openssl x509 -req -in "$DIR/server.csr" -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" \
    -CAcreateserial -days 2 -extfile "$DIR/san.ext" -out "$DIR/server.crt" 2>/dev/null

redis-server --port 17400 --bind 127.0.0.1 --save '' --appendonly no \
    --tls-port 17401 --tls-cert-file "$DIR/server.crt" --tls-key-file "$DIR/server.key" \
    --tls-ca-cert-file "$DIR/ca.crt" --tls-auth-clients no >"$DIR/redis.log" 2>&1 &
PIDS+=($!)
cat > "$DIR/proxy.toml" <<EOF
[proxy]
listen = "127.0.0.1:17402"
[admin]
listen = "127.0.0.1:17470"
[tls]
listen = "127.0.0.1:17403"
cert = "$DIR/server.crt"
key = "$DIR/server.key"
[[nodes]]
addr = "127.0.0.1:17400"
EOF
"$SHARDIS" proxy --config "$DIR/proxy.toml" >"$DIR/proxy.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
    redis-cli -p 17402 ping >/dev/null 2>&1 && redis-cli -p 17400 ping >/dev/null 2>&1 && break
    sleep 0.1
done

# requests/s of one redis-benchmark run: target, test (set|get), pipeline.
run() {
    local args=()
    case "$1" in
        plain) args=(-p 17402) ;;
        tls) args=(-p 17403 --tls --cacert "$DIR/ca.crt") ;;
        redis-tls) args=(-p 17401 --tls --cacert "$DIR/ca.crt") ;;
    esac
    redis-benchmark -h 127.0.0.1 "${args[@]}" -t "$2" -P "$3" -c 50 -d 100 \
        -n "$REQUESTS" -r 100000 --csv 2>/dev/null |
        awk -F'"' 'NR > 1 && $2 != "" { print $4; exit }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

TARGETS=(plain tls redis-tls)
declare -A RESULTS
for rep in $(seq "$REPS"); do
    for test in set get; do
        for p in 1 16; do
            for i in 0 1 2; do
                t="${TARGETS[$(( (i + rep) % 3 ))]}"
                RESULTS["$t,$test,$p"]+="$(run "$t" "$test" "$p") "
            done
        done
    done
done

{
    echo "TLS cost, requests/s (median of $REPS, redis-benchmark -c 50 -d 100 -n $REQUESTS, $(nproc) cores)"
    echo
    echo "| test | shardis plaintext | shardis TLS | redis-server TLS direct | shardis TLS / redis TLS |"
    echo "|---|---|---|---|---|"
    for test in set get; do
        for p in 1 16; do
            row=()
            for t in "${TARGETS[@]}"; do
                row+=("$(echo "${RESULTS["$t,$test,$p"]}" | tr ' ' '\n' | grep . | median)")
            done
            ratio="$(awk -v a="${row[1]}" -v b="${row[2]}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
            echo "| ${test^^} P$p | ${row[0]} | ${row[1]} | ${row[2]} | $ratio |"
        done
    done
} | tee "${OUT:-/dev/null}"
