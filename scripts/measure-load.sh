#!/usr/bin/env bash
# Shared by the load benchmarks: one measurement of `agentprocess load` against a fresh `serve`.
#   bin     the binary whose load generator drives the server (set by the caller)
#   agents, duration   as the caller sets them
#   LOAD_EXTRA   extra arguments of `agentprocess load` (an array, optional)
ticks=$(getconf CLK_TCK)

# One measurement: a fresh server of binary $1 with the rest as its extra arguments and the
# environment set by the caller, loaded by this build's generator; prints "runs/s  server CPU ms
# per run".
measure_binary() {
    local server=$1; shift
    local dir port pid runs before after
    dir=$(mktemp -d -t agentprocess-load-XXXXXX)
    port=18971
    "$server" serve --data "$dir" --listen "127.0.0.1:$port" "$@" >"$dir/serve.out" 2>"$dir/serve.err" &
    pid=$!
    for _ in $(seq 1 100); do
        grep -q "MCP endpoint" "$dir/serve.out" 2>/dev/null && break
        sleep 0.1
    done
    if grep -q "^metrics: " "$dir/serve.out"; then
        local metrics
        metrics=$(sed -n 's/^metrics: //p' "$dir/serve.out")
        (while kill -0 "$pid" 2>/dev/null; do curl -s -o /dev/null "$metrics"; sleep 1; done) &
    fi
    before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    "$bin" load --server "http://127.0.0.1:$port" --data "$dir" --agents "$agents" --people 0 \
        --duration "$duration" --warmup 5s --json "${LOAD_EXTRA[@]}" >"$dir/load.json"
    after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    kill "$pid"; wait "$pid" 2>/dev/null || true
    runs=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['runs'], d['runsPerSecond'])" "$dir/load.json")
    set -- $runs
    python3 -c "import sys; runs, rate, cpu = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]) / int(sys.argv[4]); print(f'{rate:8.1f} runs/s  {1000 * cpu / max(runs, 1):.3f} ms CPU per run (window and finishing)')" \
        "$1" "$2" "$((after - before))" "$ticks"
    rm -rf "$dir"
}

