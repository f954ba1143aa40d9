# bench/lib.sh — shell helpers the bench scripts share; sourced, never run.

# free_block N : a base port with N free consecutive ports above it. Below
# the kernel's ephemeral range (32768 and up): a port there may be the local
# end of some connection (a load generator's), which no listener can then
# bind however free a connect probe finds it.
free_block() {
  local base p ok
  for base in $(seq $((21000 + RANDOM % 500)) 500 32000); do
    ok=1
    for p in $(seq "$base" $((base + $1))); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then ok=0; break; fi
    done
    ((ok)) && { echo "$base"; return; }
  done
  echo "no free ports" >&2; exit 1
}

# wait_ready PORT PID : PING answered -> 0; PID gone, or no PONG within
# READY_TIMEOUT_DS tenths of a second (default 50) -> 1.
wait_ready() {
    local port="$1" pid="$2" i
    for i in $(seq 1 "${READY_TIMEOUT_DS:-50}"); do
        kill -0 "$pid" 2>/dev/null || return 1
        [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    return 1
}
