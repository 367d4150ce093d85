#!/usr/bin/env bash
# A long soak through a loopback cluster (deploy/local-cluster.sh: 3 etcd members, 3 actor
# hosts, 2 schedulers, 2 gateways) at a steady rate, with ended runs archived and idempotency
# records dropped after short windows, so what etcd holds should level off. Every SAMPLE it
# records etcd's database size and bytes in use (the largest member), its key count, and the
# resident memory of each kind of process (and of each process, in processes.txt); at the end
# it prints the load's figures, whether etcd stayed flat over the last 10 minutes, and each
# process's memory trend.
#
#   DURATION   how long the load runs (default 30m)
#   RATE       runs started per second in total (default 100)
#   AGENTS     concurrent agents (default 64); PEOPLE concurrent people approving (default 4)
#   ARCHIVE_AFTER          seconds an ended run stays in etcd (default 60)
#   IDEMPOTENCY_RETENTION  seconds a requestId replays (default 120)
#   UPKEEP     seconds between etcd compactions by the scheduler leader (default 60)
#   SAMPLE     seconds between samples (default 30)
#   CLUSTER_BIN  the binary (default target/release/agentprocess)
#   SOAK_OUT   where samples and results go (default a new temp folder)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${CLUSTER_BIN:-$root/target/release/agentprocess}
duration=${DURATION:-30m}
rate=${RATE:-100}
sample=${SAMPLE:-30}
base=${CLUSTER_BASE_PORT:-18080}
out=${SOAK_OUT:-$(mktemp -d -t agentprocess-soak-XXXXXX)}
[ -x "$bin" ] || { echo "no binary at $bin: cargo build --release first" >&2; exit 2; }
mkdir -p "$out"

export AGENTPROCESS_ARCHIVE_ENDED_RUNS_AFTER_SECONDS=${ARCHIVE_AFTER:-60}
export AGENTPROCESS_IDEMPOTENCY_RETENTION_SECONDS=${IDEMPOTENCY_RETENTION:-120}
export AGENTPROCESS_CLUSTER__ETCD_UPKEEP_SECONDS=${UPKEEP:-60}
dir="$out/cluster"
CLUSTER_BIN=$bin CLUSTER_DIR=$dir CLUSTER_BASE_PORT=$base RUST_LOG=warn \
    "$root/deploy/local-cluster.sh" >"$out/cluster.out" 2>&1 &
cluster=$!
stop() { kill -TERM "$cluster" 2>/dev/null || true; wait "$cluster" 2>/dev/null || true; }
trap stop EXIT
for _ in $(seq 1 300); do
    grep -q "Ctrl-C stops everything" "$out/cluster.out" 2>/dev/null && break
    kill -0 "$cluster" 2>/dev/null || { cat "$out/cluster.out"; exit 1; }
    sleep 0.2
done

echo "== soak: $duration at $rate runs/s, archive after ${AGENTPROCESS_ARCHIVE_ENDED_RUNS_AFTER_SECONDS}s, results in $out"
"$bin" load --server "http://127.0.0.1:$base" --dev-key "$dir/dev-signing-key" --agents "${AGENTS:-64}" \
    --people "${PEOPLE:-4}" --rate "$rate" --threads 2 --warmup 5s --duration "$duration" --json \
    >"$out/load.json" 2>"$out/load.err" &
load=$!

# elapsed seconds, then per member: dbSize dbSizeInUse; then the key count; then RSS (KiB) summed
# per kind of process.
started=$(date +%s)
echo "elapsed db_size db_in_use keys rss_etcd rss_actor rss_gateway rss_scheduler" >"$out/samples.txt"
while kill -0 "$load" 2>/dev/null; do
    now=$(($(date +%s) - started))
    sizes=""
    for i in 0 1 2; do
        status=$(curl -fsS -X POST -d '{}' "http://127.0.0.1:$((base + 20 + i))/v3/maintenance/status" || echo '{}')
        sizes+=" $(python3 -c 'import json,sys; s=json.loads(sys.argv[1]); print(s.get("dbSize",0), s.get("dbSizeInUse",0))' "$status")"
    done
    keys=$(curl -fsS -X POST -d '{"key":"AA==","range_end":"AA==","count_only":true}' \
        "http://127.0.0.1:$((base + 20))/v3/kv/range" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("count",0))' || echo 0)
    rss=$(ps -o rss=,args= --ppid "$cluster" | python3 -c '
import sys
kinds = {"etcd": 0, "actor": 0, "gateway": 0, "scheduler": 0}
for line in sys.stdin:
    rss, args = line.split(None, 1)
    words = args.split()
    kind = "etcd" if words[0].endswith("etcd") else (words[1] if len(words) > 1 else "")
    if kind in kinds:
        kinds[kind] += int(rss)
print(" ".join(str(kinds[k]) for k in ("etcd", "actor", "gateway", "scheduler")))')
    # and each process by itself: elapsed, pid, kind, RSS (KiB)
    ps -o pid=,rss=,args= --ppid "$cluster" | while read -r pid rss cmd kind _; do
        case "$cmd" in *etcd) kind=etcd ;; esac
        case "$kind" in etcd | actor | gateway | scheduler) echo "$now $pid $kind $rss" ;; esac
    done >>"$out/processes.txt"
    python3 -c '
import sys
v = list(map(int, sys.argv[2].split()))
size = max(v[0::2]); in_use = max(v[1::2])
print(sys.argv[1], size, in_use, sys.argv[3], sys.argv[4])' "$now" "$sizes" "$keys" "$rss" >>"$out/samples.txt"
    tail -1 "$out/samples.txt"
    sleep "$sample"
done
wait "$load" || { cat "$out/load.err"; exit 1; }

python3 - "$out/samples.txt" "$out/load.json" "$out/processes.txt" <<'PY'
import json, sys
rows = [list(map(int, line.split())) for line in open(sys.argv[1]).read().splitlines()[1:]]
load = json.load(open(sys.argv[2]))
mib = lambda b: b / (1 << 20)
end = rows[-1][0]
last = [r for r in rows if r[0] >= end - 600]
def slope(points):
    # least squares, per minute
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points) or 1
    return sum((x - mx) * (y - my) for x, y in points) / den * 60
print(f"runs: {load['runsPerSecond']:.1f}/s over {load['seconds']:.0f} s; unexpected errors: {load['unexpectedErrors']}")
for t in load["tools"]:
    print(f"  {t['tool']:<10} {t['callsPerSecond']:8.1f}/s  p50 {t['p50Ms']:7.2f} ms  p99 {t['p99Ms']:7.2f} ms")
print(f"etcd database, largest member: max {mib(max(r[1] for r in rows)):.1f} MiB; "
      f"in use max {mib(max(r[2] for r in rows)):.1f} MiB; keys max {max(r[3] for r in rows)}")
print(f"last 10 min: size {mib(min(r[1] for r in last)):.1f}..{mib(max(r[1] for r in last)):.1f} MiB, "
      f"in use {mib(min(r[2] for r in last)):.1f}..{mib(max(r[2] for r in last)):.1f} MiB "
      f"(trend {mib(slope([(r[0], r[2]) for r in last])):+.2f} MiB/min), "
      f"keys {min(r[3] for r in last)}..{max(r[3] for r in last)} (trend {slope([(r[0], r[3]) for r in last]):+.0f}/min)")
for i, kind in enumerate(("etcd", "actor", "gateway", "scheduler")):
    col = 4 + i
    print(f"resident memory, all {kind} processes: start {rows[0][col] / 1024:.0f} MiB, "
          f"last 10 min {min(r[col] for r in last) / 1024:.0f}..{max(r[col] for r in last) / 1024:.0f} MiB "
          f"(trend {slope([(r[0], r[col]) for r in last]) / 1024:+.1f} MiB/min)")
per_process = {}
for line in open(sys.argv[3]).read().splitlines():
    at, pid, kind, rss = line.split()
    per_process.setdefault((kind, pid), []).append((int(at), int(rss)))
for (kind, pid), points in sorted(per_process.items()):
    tail = [p for p in points if p[0] >= end - 600]
    print(f"  {kind} {pid}: start {points[0][1] / 1024:.0f} MiB, end {points[-1][1] / 1024:.0f} MiB, "
          f"last 10 min trend {slope(tail) / 1024:+.1f} MiB/min")
PY
