#!/usr/bin/env bash
# The cluster's cost per run against `serve`'s and against etcd's raw write rate, in one sitting.
# First `serve` under `agentprocess load` (its CPU per run); then, for each count of actor hosts,
# a loopback cluster (deploy/local-cluster.sh: 3 etcd members, 2 gateways, 2 schedulers), etcd's
# raw one-put transactions (`load --etcd-puts`) and `agentprocess load` through the first gateway
# at the same concurrency. For the load's measured window it prints runs/s, p50 and p99 per tool,
# the CPU every process of the cluster spent per run (by role, and against `serve`'s), and
# etcd's requests per protocol write (start_run, claim, renew, submit, escalate, decide, cancel,
# send_event): raft proposals committed, and Range, Txn and Put requests served.
#
#   ACTORS    actor host counts to measure (default "1 3")
#   AGENTS    concurrent agents, and raw-put workers (default 64)
#   PEOPLE    concurrent people approving (default 4)
#   DURATION  measured window of each measurement, in seconds (default 20)
#   WARMUP    seconds of load before the window (default 5)
#   SERVE     measure `serve` first, for the ratio (default 1; 0 skips it)
#   RAW_PUTS  measure etcd's raw one-put transactions first (default 1; 0 skips it)
#   LOAD_ARGS more arguments of every `agentprocess load` (e.g. "--wait-seconds 5")
#   KEEP      1 keeps each cluster's folder (etcd data, every role's log) and prints where
#   CLUSTER_BIN  the binary (default target/release/agentprocess)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${CLUSTER_BIN:-$root/target/release/agentprocess}
agents=${AGENTS:-64}
people=${PEOPLE:-4}
duration=${DURATION:-20}
duration=${duration%s}
warmup=${WARMUP:-5}
warmup=${warmup%s}
base=${CLUSTER_BASE_PORT:-18080}
[ -x "$bin" ] || { echo "no binary at $bin: cargo build --release first" >&2; exit 2; }
ticks=$(getconf CLK_TCK)

# "role pid" for every process of the cluster whose launcher is $1.
cluster_processes() {
    local pid command
    for pid in $(pgrep -P "$1"); do
        command=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
        case "$command" in
            etcd*) echo "etcd $pid" ;;
            *" actor "*) echo "actor $pid" ;;
            *" gateway "*) echo "gateway $pid" ;;
            *" scheduler "*) echo "scheduler $pid" ;;
        esac
    done
}

# "role pid ticks" for each process given as "role pid" lines on stdin.
cpu_ticks() {
    local role pid
    while read -r role pid; do
        echo "$role $pid $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)"
    done
}

# "machine all ticks": the CPU the whole machine spent (user, nice, system, irq, softirq), from
# /proc/stat, in the same clock ticks.
machine_ticks() {
    awk '/^cpu / { print "machine all " $2 + $3 + $4 + $7 + $8 }' /proc/stat
}

# The etcd counters of one member's /metrics: proposals committed, and requests served by method.
etcd_counters() {
    curl -fsS "$1/metrics" | awk '
        /^etcd_server_proposals_committed_total / { print "proposals " $2 }
        /^grpc_server_handled_total\{/ && /grpc_service="etcdserverpb.KV"/ {
            match($0, /grpc_method="[A-Za-z]+"/); m = substr($0, RSTART + 13, RLENGTH - 14)
            sum[m] += $NF
        }
        /^grpc_server_handled_total\{/ && /grpc_service="etcdserverpb.Lease"/ { sum["Lease"] += $NF }
        END { for (m in sum) print m " " sum[m] }'
}

# Every figure of one load window, as JSON, from the snapshots taken at its start and end.
summarize() {
    python3 - "$@" <<'PY'
import json, sys
load_file, cpu_before, cpu_after, etcd_before, etcd_after, ticks, serve_cpu = sys.argv[1:8]
load = json.load(open(load_file))
def table(path):
    rows = {}
    for line in open(path):
        parts = line.split()
        if len(parts) == 3:
            rows[(parts[0], parts[1])] = float(parts[2])
    return rows
def counters(path):
    rows = {}
    for line in open(path):
        key, value = line.split()
        rows[key] = rows.get(key, 0.0) + float(value)
    return rows
before, after = table(cpu_before), table(cpu_after)
cpu, members = {}, []
for key, end in after.items():
    seconds = (end - before.get(key, end)) / float(ticks)
    if key[0] == "machine":
        continue
    cpu[key[0]] = cpu.get(key[0], 0.0) + seconds
    if key[0] == "etcd":
        members.append(seconds)
machine = after.get(("machine", "all"), 0) - before.get(("machine", "all"), 0)
writes_per_second = sum(t["callsPerSecond"] for t in load["tools"]
    if t["tool"] in ("start_run", "claim", "renew", "submit", "escalate", "decide", "cancel", "send_event"))
window = load["runs"] / load["runsPerSecond"] if load["runsPerSecond"] else 0
writes = writes_per_second * window
e0, e1 = counters(etcd_before), counters(etcd_after)
delta = {k: e1.get(k, 0) - e0.get(k, 0) for k in e1}
total_cpu = sum(cpu.values())
print(f"runs: {load['runsPerSecond']:.0f}/s over {window:.1f} s ({load['runs']} runs); protocol writes {writes_per_second:.0f}/s; unexpected errors: {load['unexpectedErrors']}")
line = ", ".join(f"{role} {1000 * seconds / load['runs']:.2f}" for role, seconds in sorted(cpu.items()))
ratio = ""
if float(serve_cpu) > 0:
    ratio = f" = {1000 * total_cpu / load['runs'] / float(serve_cpu):.1f}x serve's {float(serve_cpu):.2f} ms"
print(f"CPU per run, all processes: {1000 * total_cpu / load['runs']:.2f} ms{ratio} ({line})")
if machine:
    outside = machine / float(ticks) - total_cpu
    print(f"  the whole machine: {1000 * machine / float(ticks) / load['runs']:.2f} ms per run, "
          f"{machine / float(ticks) / window:.2f} cores ({outside / window:.2f} outside the measured processes: the load generator, the kernel)")
if members:
    busiest = ", ".join(f"{1000 * seconds / load['runs']:.2f}" for seconds in sorted(members, reverse=True))
    print(f"  etcd members, busiest (the leader) first: {busiest} ms per run")
if writes:
    # Proposals are counted by every member: one member's share is the cluster's count.
    proposals = delta.get("proposals", 0) / 3
    print(f"etcd per protocol write: {proposals / writes:.2f} raft proposals, {delta.get('Range', 0) / writes:.2f} Range, "
          f"{delta.get('Txn', 0) / writes:.2f} Txn, {delta.get('Put', 0) / writes:.2f} Put, {delta.get('Lease', 0) / writes:.2f} lease requests")
for t in load["tools"]:
    accepted = f"  (answered ok: p50 {t['okP50Ms']:.2f}, p99 {t['okP99Ms']:.2f} ms)" if t['ok'] < t['calls'] else ""
    print(f"  {t['tool']:<10} {t['callsPerSecond']:8.1f}/s  p50 {t['p50Ms']:7.2f} ms  p99 {t['p99Ms']:7.2f} ms{accepted}")
PY
}

# Runs `load` with the given arguments and, in the background, snapshots CPU and etcd at the
# start and the end of its measured window into $dir.
load_with_snapshots() {
    local dir=$1 processes=$2 etcd=$3
    shift 3
    (
        sleep "$warmup"
        { cpu_ticks <"$processes"; machine_ticks; } >"$dir/cpu.before"
        : >"$dir/etcd.before"
        for member in $etcd; do etcd_counters "$member" >>"$dir/etcd.before"; done
        sleep "$duration"
        { cpu_ticks <"$processes"; machine_ticks; } >"$dir/cpu.after"
        : >"$dir/etcd.after"
        for member in $etcd; do etcd_counters "$member" >>"$dir/etcd.after"; done
    ) &
    local snapshots=$!
    "$bin" load "$@" --warmup "${warmup}s" --duration "${duration}s" --json >"$dir/load.json"
    wait "$snapshots"
}

serve_cpu=0
if [ "${SERVE:-1}" = 1 ]; then
    dir=$(mktemp -d -t agentprocess-bench-XXXXXX)
    "$bin" serve --data "$dir/data" --listen "127.0.0.1:$base" >"$dir/serve.out" 2>"$dir/serve.err" &
    server=$!
    for _ in $(seq 1 100); do
        grep -q "MCP endpoint" "$dir/serve.out" 2>/dev/null && break
        sleep 0.1
    done
    echo "serve $server" >"$dir/processes"
    touch "$dir/etcd.before" "$dir/etcd.after"
    echo "== serve, $agents agents, $people people, ${duration}s"
    load_with_snapshots "$dir" "$dir/processes" "" --server "http://127.0.0.1:$base" --data "$dir/data" \
        --agents "$agents" --people "$people" --threads 2 ${LOAD_ARGS:-}
    # Its CPU per run, as the summary prints it, is what the clusters' are compared with.
    summarize "$dir/load.json" "$dir/cpu.before" "$dir/cpu.after" "$dir/etcd.before" "$dir/etcd.after" \
        "$ticks" 0 | tee "$dir/summary"
    serve_cpu=$(sed -n 's/^CPU per run, all processes: \([0-9.]*\) ms.*/\1/p' "$dir/summary")
    kill "$server"; wait "$server" 2>/dev/null || true
    rm -rf "$dir"
fi

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
    cluster_processes "$cluster" >"$dir/processes"
    members=""
    for i in 0 1 2; do members+=" http://127.0.0.1:$((base + 20 + i))"; done
    endpoints="http://127.0.0.1:$((base + 20)),http://127.0.0.1:$((base + 21)),http://127.0.0.1:$((base + 22))"
    public="http://127.0.0.1:$base"
    key="$dir/dev-signing-key"
    echo "== $actors actor host(s), $agents agents, $people people, ${duration}s"
    if [ "${RAW_PUTS:-1}" = 1 ]; then
        "$bin" load --etcd-puts "$endpoints" --agents "$agents" --threads 2 --warmup 3s --duration "${duration}s" \
            --json >"$dir/puts.json"
        python3 -c "
import json; p = json.load(open('$dir/puts.json'))
print(f\"etcd raw one-put transactions: {p['transactionsPerSecond']:.0f}/s (p50 {p['p50Ms']:.2f} ms, p99 {p['p99Ms']:.2f} ms)\")"
    fi
    load_with_snapshots "$dir" "$dir/processes" "$members" --server "$public" --dev-key "$key" \
        --agents "$agents" --people "$people" --threads 2 ${LOAD_ARGS:-}
    summarize "$dir/load.json" "$dir/cpu.before" "$dir/cpu.after" "$dir/etcd.before" "$dir/etcd.after" "$ticks" "$serve_cpu"
    kill -TERM "$cluster" 2>/dev/null || true
    wait "$cluster" 2>/dev/null || true
    if [ "${KEEP:-0}" = 1 ]; then echo "kept: $dir"; else rm -rf "$dir"; fi
done
