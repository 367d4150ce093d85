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
LOAD_EXTRA=()
source "$root/scripts/measure-load.sh"

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
