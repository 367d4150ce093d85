#!/usr/bin/env bash
# Idle agents polling against idle agents waiting (the x-wait-1 profile), on a loopback cluster
# (deploy/local-cluster.sh: 3 etcd members, 3 actor hosts, 2 gateways, 2 schedulers). For each
# mode, `agentprocess load --idle-agents` through gateway 0 prints the agents' get_work calls/s
# and latency; this script adds etcd's Range requests per second over the window (every
# member's `grpc_server_handled_total`), and the resident memory of the gateways and actor hosts
# in the middle of the window against before the load, per idle agent. A last measurement has
# the agents wait while a prober starts a run every WAKE_EVERY through gateway 1: how long from
# each start's answer until a waiting agent on gateway 0 got a page listing it.
#
#   IDLE        idle agents (default 1024)
#   POLL        the pause between two polls of a polling agent (default 1s)
#   WAIT        waitSeconds of a waiting agent (default 20)
#   WAKE_EVERY  how often the prober starts a run (default 100ms)
#   DURATION    measured window, in seconds (default 30)
#   WARMUP      seconds before the window (default 10)
#   CLUSTER_BIN the binary (default target/release/agentprocess)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${CLUSTER_BIN:-$root/target/release/agentprocess}
idle=${IDLE:-1024}
poll=${POLL:-1s}
wait_seconds=${WAIT:-20}
wake_every=${WAKE_EVERY:-100ms}
duration=${DURATION:-30}
warmup=${WARMUP:-10}
base=${CLUSTER_BASE_PORT:-18080}
[ -x "$bin" ] || { echo "no binary at $bin: cargo build --release first" >&2; exit 2; }

dir=$(mktemp -d -t agentprocess-waiting-XXXXXX)
CLUSTER_BIN=$bin CLUSTER_DIR=$dir CLUSTER_ACTORS=3 CLUSTER_BASE_PORT=$base \
    RUST_LOG=warn "$root/deploy/local-cluster.sh" >"$dir/cluster.out" 2>&1 &
cluster=$!
trap 'kill -TERM $cluster 2>/dev/null || true; wait $cluster 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 1 300); do
    grep -q "Ctrl-C stops everything" "$dir/cluster.out" 2>/dev/null && break
    kill -0 "$cluster" 2>/dev/null || { cat "$dir/cluster.out"; exit 1; }
    sleep 0.2
done

# The summed Range requests every etcd member served.
ranges() {
    local total=0 i n
    for i in 0 1 2; do
        n=$(curl -fsS "http://127.0.0.1:$((base + 20 + i))/metrics" | awk '
            /^grpc_server_handled_total\{/ && /grpc_method="Range"/ { sum += $NF } END { printf "%d", sum }')
        total=$((total + n))
    done
    echo "$total"
}

# Resident kilobytes of every process of the cluster whose command line has " $1 ".
rss_kb() {
    local total=0 pid
    for pid in $(pgrep -P "$cluster"); do
        if tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q " $1 "; then
            total=$((total + $(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")))
        fi
    done
    echo "$total"
}

measure() {
    local name=$1; shift
    local gateways_before actors_before gateways_during actors_during ranges_before ranges_after
    gateways_before=$(rss_kb gateway)
    actors_before=$(rss_kb actor)
    "$bin" load --server "http://127.0.0.1:$base" --dev-key "$dir/dev-signing-key" --threads 2 \
        --idle-agents "$idle" --warmup "${warmup}s" --duration "${duration}s" --json "$@" >"$dir/$name.json" &
    local load=$!
    sleep "$warmup"
    ranges_before=$(ranges)
    sleep $((duration / 2))
    gateways_during=$(rss_kb gateway)
    actors_during=$(rss_kb actor)
    sleep $((duration - duration / 2))
    ranges_after=$(ranges)
    wait "$load"
    python3 - "$dir/$name.json" "$name" "$duration" "$ranges_before" "$ranges_after" \
        "$gateways_before" "$gateways_during" "$actors_before" "$actors_during" <<'PY'
import json, sys
path, name, seconds, r0, r1, g0, g1, a0, a1 = sys.argv[1:]
report = json.load(open(path))
seconds = float(seconds)
agents = report["idleAgents"]
print(f"== {name}: {agents} idle agents")
print(f"  get_work: {report['getWorkPerSecond']:.1f} calls/s, p50 {report['getWorkP50Ms']:.1f} ms, p99 {report['getWorkP99Ms']:.1f} ms, {report['failures']} failed")
print(f"  etcd Range requests: {(int(r1) - int(r0)) / seconds:.1f}/s")
print(f"  gateways' memory: {int(g0) / 1024:.1f} MiB before, {int(g1) / 1024:.1f} MiB during = {(int(g1) - int(g0)) / agents:.1f} KiB per idle agent")
print(f"  actor hosts' memory: {int(a0) / 1024:.1f} MiB before, {int(a1) / 1024:.1f} MiB during = {(int(a1) - int(a0)) / agents:.1f} KiB per idle agent")
if report["wakesStarted"]:
    print(f"  wakes: {report['wakesStarted']} started, {report['wakesHeard']} heard; start answered -> heard: p50 {report['wakeP50Ms']:.2f} ms, p99 {report['wakeP99Ms']:.2f} ms, max {report['wakeMaxMs']:.2f} ms")
PY
}

measure polling --idle-poll "$poll"
measure waiting --wait-seconds "$wait_seconds" --no-publish
measure waiting-with-wakes --wait-seconds "$wait_seconds" --no-publish \
    --wake-every "$wake_every" --wake-server "http://127.0.0.1:$((base + 1))"
