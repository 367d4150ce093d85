#!/usr/bin/env bash
# One organization flooding a shared `serve` against another's latency. A calm organization's
# agents start runs at a paced rate; a flooding organization's agents call as fast as answers
# come, far past its `admission.calls_per_second_per_organization`. Three measurements, each on a
# fresh server: the calm organization alone, then beside the flood with the limit, then beside
# the flood without any limit. Prints the calm organization's runs/s and p50/p99 per tool, and
# what the flood got done and had refused.
#
#   LIMIT       calls per second per organization (default 500; the calm load stays under it)
#   CALM_RATE   runs/s the calm organization starts (default 60: about 4.5 calls per run)
#   CALM_AGENTS, FLOOD_AGENTS   (default 16, 64)
#   FLOOD_RATE  runs/s the flood's agents start (default: unpaced, each agent as fast as answers
#               come; a refused call ends that run's attempt and the agent starts its next)
#   DURATION    measured window, in seconds (default 20)
#   BIN         the binary (default target/release/agentprocess)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/target/release/agentprocess}
limit=${LIMIT:-500}
calm_rate=${CALM_RATE:-60}
calm_agents=${CALM_AGENTS:-16}
flood_agents=${FLOOD_AGENTS:-64}
duration=${DURATION:-20}
port=${PORT:-18990}
[ -x "$bin" ] || { echo "no binary at $bin: cargo build --release first" >&2; exit 2; }

# A fresh server with the environment given as arguments; prints its pid.
start_server() {
    local dir=$1; shift
    env "$@" "$bin" serve --data "$dir" --listen "127.0.0.1:$port" >"$dir/serve.out" 2>"$dir/serve.err" &
    local pid=$!
    for _ in $(seq 1 100); do
        grep -q "MCP endpoint" "$dir/serve.out" 2>/dev/null && break
        sleep 0.1
    done
    echo "$pid"
}

# Runs the calm organization's load (and the flood's beside it when $2 is "flood").
measure() {
    local name=$1 flood=$2; shift 2
    local dir pid flood_pid=""
    dir=$(mktemp -d -t agentprocess-fairness-XXXXXX)
    pid=$(start_server "$dir" "$@")
    if [ "$flood" = flood ]; then
        "$bin" load --server "http://127.0.0.1:$port" --data "$dir" --org flood --agents "$flood_agents" \
            --people 0 --warmup 5s --duration "$((duration + 5))s" ${FLOOD_RATE:+--rate "$FLOOD_RATE"} \
            --json >"$dir/flood.json" 2>/dev/null &
        flood_pid=$!
        sleep 2
    fi
    "$bin" load --server "http://127.0.0.1:$port" --data "$dir" --org calm --agents "$calm_agents" \
        --people 0 --rate "$calm_rate" --warmup 3s --duration "${duration}s" --json >"$dir/calm.json"
    [ -n "$flood_pid" ] && wait "$flood_pid" || true
    kill "$pid"; wait "$pid" 2>/dev/null || true
    python3 - "$name" "$dir/calm.json" "$dir/flood.json" <<'PY'
import json, os, sys
name, calm_path, flood_path = sys.argv[1:]
calm = json.load(open(calm_path))
print(f"== {name}")
print(f"  calm: {calm['runsPerSecond']:.1f} runs/s, unexpected errors {calm['unexpectedErrors']}")
for t in calm["tools"]:
    print(f"    {t['tool']:<10} {t['callsPerSecond']:7.1f}/s  p50 {t['p50Ms']:7.2f} ms  p99 {t['p99Ms']:7.2f} ms")
if os.path.exists(flood_path) and os.path.getsize(flood_path):
    flood = json.load(open(flood_path))
    refused = sum(n for t in flood["tools"] for k, n in t["errors"].items() if k.startswith("retry"))
    print(f"  flood: {flood['runsPerSecond']:.1f} runs/s, {flood['callsPerSecond']:.0f} calls/s offered, "
          f"{refused / flood['seconds']:.0f}/s answered retry")
PY
    rm -rf "$dir"
}

measure "calm alone, limit $limit calls/s per organization" none \
    AGENTPROCESS_ADMISSION__CALLS_PER_SECOND_PER_ORGANIZATION="$limit"
measure "calm beside the flood, limit $limit calls/s per organization" flood \
    AGENTPROCESS_ADMISSION__CALLS_PER_SECOND_PER_ORGANIZATION="$limit"
measure "calm beside the flood, no limit" flood
