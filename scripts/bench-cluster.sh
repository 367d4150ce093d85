#!/usr/bin/env bash
# The cluster's figures against etcd's raw write rate, in one sitting: for each count of actor
# hosts, a loopback cluster (deploy/local-cluster.sh: 3 etcd members, 2 gateways, 2 schedulers),
# then etcd's raw one-put transactions (`load --etcd-puts`) and `agentprocess load` through the
# first gateway at the same concurrency, and the ratio of protocol writes/s (start_run, claim,
# submit, decide) to raw one-put transactions/s.
#
#   ACTORS    actor host counts to measure (default "1 3")
#   AGENTS    concurrent agents, and raw-put workers (default 64)
#   PEOPLE    concurrent people approving (default 4)
#   DURATION  measured window of each measurement (default 20s)
#   CLUSTER_BIN  the binary (default target/release/agentprocess)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${CLUSTER_BIN:-$root/target/release/agentprocess}
agents=${AGENTS:-64}
people=${PEOPLE:-4}
duration=${DURATION:-20s}
base=${CLUSTER_BASE_PORT:-18080}
[ -x "$bin" ] || { echo "no binary at $bin: cargo build --release first" >&2; exit 2; }

for actors in ${ACTORS:-1 3}; do
    dir=$(mktemp -d -t agentprocess-bench-XXXXXX)
    CLUSTER_BIN=$bin CLUSTER_DIR=$dir CLUSTER_ACTORS=$actors CLUSTER_BASE_PORT=$base \
        RUST_LOG=warn "$root/deploy/local-cluster.sh" >"$dir/cluster.out" 2>&1 &
    cluster=$!
    for _ in $(seq 1 300); do
        grep -q "Ctrl-C stops everything" "$dir/cluster.out" 2>/dev/null && break
        kill -0 "$cluster" 2>/dev/null || { cat "$dir/cluster.out"; exit 1; }
        sleep 0.2
    done
    endpoints="http://127.0.0.1:$((base + 20)),http://127.0.0.1:$((base + 21)),http://127.0.0.1:$((base + 22))"
    public="http://127.0.0.1:$base"
    key="$dir/dev-signing-key"
    echo "== $actors actor host(s), $agents agents, $people people, $duration"
    "$bin" load --etcd-puts "$endpoints" --agents "$agents" --threads 2 --warmup 3s --duration "$duration" \
        --json >"$dir/puts.json"
    "$bin" load --server "$public" --dev-key "$key" --agents "$agents" --people "$people" --threads 2 \
        --warmup 5s --duration "$duration" --json >"$dir/load.json"
    python3 - "$dir/puts.json" "$dir/load.json" <<'PY'
import json, sys
puts = json.load(open(sys.argv[1]))
load = json.load(open(sys.argv[2]))
writes = sum(t["callsPerSecond"] for t in load["tools"] if t["tool"] in ("start_run", "claim", "submit", "decide"))
print(f"etcd raw one-put transactions: {puts['transactionsPerSecond']:.0f}/s (p50 {puts['p50Ms']:.2f} ms, p99 {puts['p99Ms']:.2f} ms)")
print(f"runs: {load['runsPerSecond']:.0f}/s; protocol writes: {writes:.0f}/s; ratio writes/raw puts: {writes / puts['transactionsPerSecond']:.2f}")
print(f"unexpected errors: {load['unexpectedErrors']}")
for t in load["tools"]:
    print(f"  {t['tool']:<10} {t['callsPerSecond']:8.1f}/s  p50 {t['p50Ms']:7.2f} ms  p99 {t['p99Ms']:7.2f} ms")
PY
    kill -TERM "$cluster" 2>/dev/null || true
    wait "$cluster" 2>/dev/null || true
    rm -rf "$dir"
done
