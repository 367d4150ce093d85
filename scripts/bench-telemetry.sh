#!/usr/bin/env bash
# What telemetry costs `serve`, in one sitting: `agentprocess load` against a fresh server in
# turns, without telemetry, and with everything on (Prometheus scraped every second, every trace
# exported over OTLP at 100% sampling to a local sink, JSON log lines), printing runs/s and the
# server's CPU per run for each.
#
#   TURNS     turns of each (default 3)
#   AGENTS    concurrent agents (default 64)
#   DURATION  measured window (default 30s)
#   BENCH_BIN the binary (default target/release/agentprocess)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BENCH_BIN:-$root/target/release/agentprocess}
turns=${TURNS:-3}
agents=${AGENTS:-64}
duration=${DURATION:-30s}
[ -x "$bin" ] || { echo "no binary at $bin: cargo build --release --bin agentprocess first" >&2; exit 2; }
ticks=$(getconf CLK_TCK)

# One measurement: a fresh server with "$@" as its extra arguments and the environment set by
# the caller; prints "runs/s  server CPU ms per run".
measure() {
    local dir port pid runs before after
    dir=$(mktemp -d -t agentprocess-telemetry-XXXXXX)
    port=18971
    "$bin" serve --data "$dir" --listen "127.0.0.1:$port" "$@" >"$dir/serve.out" 2>"$dir/serve.err" &
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
        --duration "$duration" --warmup 5s --json >"$dir/load.json"
    after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    kill "$pid"; wait "$pid" 2>/dev/null || true
    runs=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['runs'], d['runsPerSecond'])" "$dir/load.json")
    set -- $runs
    python3 -c "import sys; runs, rate, cpu = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]) / int(sys.argv[4]); print(f'{rate:8.1f} runs/s  {1000 * cpu / max(runs, 1):.3f} ms CPU per run (window and finishing)')" \
        "$1" "$2" "$((after - before))" "$ticks"
    rm -rf "$dir"
}

python3 "$root/scripts/otlp-sink.py" 18972 &
sink=$!
trap 'kill $sink 2>/dev/null || true' EXIT
for turn in $(seq 1 "$turns"); do
    echo "turn $turn, telemetry off: $(RUST_LOG=info,rmcp=warn measure)"
    echo "turn $turn, telemetry on:  $(RUST_LOG=info,rmcp=warn OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:18972 \
        OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_TRACES_SAMPLER=always_on \
        measure --metrics-listen 127.0.0.1:18973 --log-format json)"
done
