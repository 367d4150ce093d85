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
#   BEFORE_BIN  a build from before telemetry (optional): measured first in each turn, telemetry
#               off (it has none), for the comparison with the build before it
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BENCH_BIN:-$root/target/release/agentprocess}
turns=${TURNS:-3}
agents=${AGENTS:-64}
duration=${DURATION:-30s}
[ -x "$bin" ] || { echo "no binary at $bin: cargo build --release --bin agentprocess first" >&2; exit 2; }
ticks=$(getconf CLK_TCK)

# One measurement: a fresh server of binary $1 with the rest as its extra arguments and the
# environment set by the caller, loaded by this build's generator; prints "runs/s  server CPU ms
# per run".
measure_binary() {
    local server=$1; shift
    local dir port pid runs before after
    dir=$(mktemp -d -t agentprocess-telemetry-XXXXXX)
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
        --duration "$duration" --warmup 5s --json >"$dir/load.json"
    after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    kill "$pid"; wait "$pid" 2>/dev/null || true
    runs=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['runs'], d['runsPerSecond'])" "$dir/load.json")
    set -- $runs
    python3 -c "import sys; runs, rate, cpu = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]) / int(sys.argv[4]); print(f'{rate:8.1f} runs/s  {1000 * cpu / max(runs, 1):.3f} ms CPU per run (window and finishing)')" \
        "$1" "$2" "$((after - before))" "$ticks"
    rm -rf "$dir"
}

measure() {
    measure_binary "$bin" "$@"
}

python3 "$root/scripts/otlp-sink.py" 18972 &
sink=$!
trap 'kill $sink 2>/dev/null || true' EXIT
if [ -n "${BEFORE_BIN:-}" ] && [ ! -x "$BEFORE_BIN" ]; then
    echo "BEFORE_BIN=$BEFORE_BIN is not an executable" >&2; exit 2
fi
for turn in $(seq 1 "$turns"); do
    if [ -n "${BEFORE_BIN:-}" ]; then
        echo "turn $turn, build before:  $(RUST_LOG=info,rmcp=warn measure_binary "$BEFORE_BIN")"
    fi
    echo "turn $turn, telemetry off: $(RUST_LOG=info,rmcp=warn measure)"
    echo "turn $turn, telemetry on:  $(RUST_LOG=info,rmcp=warn OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:18972 \
        OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_TRACES_SAMPLER=always_on \
        measure --metrics-listen 127.0.0.1:18973 --log-format json)"
done
