#!/usr/bin/env bash
# What a tool call costs `serve` on each MCP revision, in one sitting: `agentprocess load` against
# a fresh server in turns, its agents speaking 2025-11-25, then 2026-07-28 (each request with its
# own `_meta` and standard headers), printing runs/s and the server's CPU per run for each.
#
#   TURNS       turns of each (default 3)
#   AGENTS      concurrent agents (default 64)
#   DURATION    measured window (default 30s)
#   BENCH_BIN   the binary (default target/release/agentprocess)
#   BEFORE_BIN  a build whose direct path did not answer 2026-07-28 (optional): measured first in
#               each turn on both revisions, loaded by BENCH_BIN's generator
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BENCH_BIN:-$root/target/release/agentprocess}
turns=${TURNS:-3}
agents=${AGENTS:-64}
duration=${DURATION:-30s}
[ -x "$bin" ] || { echo "no binary at $bin: cargo build --release --bin agentprocess first" >&2; exit 2; }
if [ -n "${BEFORE_BIN:-}" ] && [ ! -x "$BEFORE_BIN" ]; then
    echo "BEFORE_BIN=$BEFORE_BIN is not an executable" >&2; exit 2
fi
source "$root/scripts/measure-load.sh"

for turn in $(seq 1 "$turns"); do
    if [ -n "${BEFORE_BIN:-}" ]; then
        LOAD_EXTRA=(--mcp-revision 2025-11-25)
        echo "turn $turn, build before, 2025-11-25: $(RUST_LOG=warn measure_binary "$BEFORE_BIN")"
        LOAD_EXTRA=(--mcp-revision 2026-07-28)
        echo "turn $turn, build before, 2026-07-28: $(RUST_LOG=warn measure_binary "$BEFORE_BIN")"
    fi
    LOAD_EXTRA=(--mcp-revision 2025-11-25)
    echo "turn $turn, 2025-11-25:                $(RUST_LOG=warn measure_binary "$bin")"
    LOAD_EXTRA=(--mcp-revision 2026-07-28)
    echo "turn $turn, 2026-07-28:                $(RUST_LOG=warn measure_binary "$bin")"
done
