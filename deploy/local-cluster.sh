#!/usr/bin/env bash
# Starts a whole cluster on loopback: 3 etcd members, 3 actor hosts, 2 gateways and 2 schedulers,
# each a process of the one agentprocess binary (etcd's own binary for etcd). Prints the MCP URLs
# and the token commands, says when a process ends, and stops everything on Ctrl-C.
#
#   CLUSTER_BIN        the binary to run (default: target/release/agentprocess, built if missing)
#   CLUSTER_DIR        where etcd data, blobs, the dev key and logs go (default: a new temp folder)
#   CLUSTER_BASE_PORT  first of the ports used (default 8080): gateways BASE and BASE+1, actor
#                      hosts BASE+10.., etcd clients BASE+20.., etcd peers BASE+30..
#   CLUSTER_ACTORS     how many actor hosts (default 3, at most 9)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=${CLUSTER_BASE_PORT:-8080}
actors=${CLUSTER_ACTORS:-3}
if ! [[ "$actors" =~ ^[1-9]$ ]]; then
    echo "CLUSTER_ACTORS must be a number from 1 to 9" >&2
    exit 2
fi

bin=${CLUSTER_BIN:-}
if [ -z "$bin" ]; then
    bin="$root/target/release/agentprocess"
    if [ ! -x "$bin" ]; then
        echo "building agentprocess (release)..."
        "$root/scripts/run.sh" --version >/dev/null
    fi
fi
command -v etcd >/dev/null 2>&1 || {
    echo "etcd is not installed: scripts/install-deps.sh installs it (Debian: apt-get install etcd-server)" >&2
    exit 2
}

dir=${CLUSTER_DIR:-$(mktemp -d -t agentprocess-cluster-XXXXXX)}
mkdir -p "$dir/logs" "$dir/blobs"
pids=()
names=()
stop() {
    trap - INT TERM EXIT
    echo
    echo "stopping the cluster..."
    # Roles first (actor hosts hand their shards over on SIGTERM), etcd last.
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[$i]}" 2>/dev/null || true; done
    wait 2>/dev/null || true
    echo "stopped; data and logs are in $dir"
    # Called from a signal's trap, the script would otherwise go back to watching the roles.
    exit 0
}
trap stop INT TERM EXIT

# Waits until `check` succeeds, giving up when a process of the cluster has ended meanwhile.
wait_for() {
    local what=$1
    shift
    for _ in $(seq 1 300); do
        "$@" >/dev/null 2>&1 && return 0
        for pid in "${pids[@]}"; do
            kill -0 "$pid" 2>/dev/null || {
                echo "a process of the cluster ended while waiting for $what; see $dir/logs" >&2
                exit 1
            }
        done
        sleep 0.2
    done
    echo "gave up waiting for $what; see $dir/logs" >&2
    exit 1
}
etcd_healthy() { curl -fsS "$1/health" | grep -q '"true"'; }

initial=""
for i in 0 1 2; do
    initial+="${initial:+,}e$i=http://127.0.0.1:$((base + 30 + i))"
done
endpoints=""
for i in 0 1 2; do
    client="http://127.0.0.1:$((base + 20 + i))"
    peer="http://127.0.0.1:$((base + 30 + i))"
    endpoints+="${endpoints:+,}$client"
    etcd --name "e$i" --data-dir "$dir/etcd-$i" \
        --listen-client-urls "$client" --advertise-client-urls "$client" \
        --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
        --initial-cluster "$initial" --initial-cluster-state new \
        --initial-cluster-token "agentprocess-local-$base" \
        >"$dir/logs/etcd-$i.log" 2>&1 &
    pids+=($!)
    names+=("etcd-$i")
done
# Every member healthy (a leader elected) before the roles connect.
for i in 0 1 2; do
    wait_for "etcd member e$i" etcd_healthy "http://127.0.0.1:$((base + 20 + i))"
done

blobs="file://$dir/blobs"
key="$dir/dev-signing-key"
for ((i = 0; i < actors; i++)); do
    "$bin" actor --etcd "$endpoints" --uploads "$blobs" --listen "127.0.0.1:$((base + 10 + i))" \
        >"$dir/logs/actor-$i.log" 2>&1 &
    pids+=($!)
    names+=("actor-$i")
done
for i in 0 1; do
    "$bin" scheduler --etcd "$endpoints" >"$dir/logs/scheduler-$i.log" 2>&1 &
    pids+=($!)
    names+=("scheduler-$i")
done
# Both gateways name the first one's URL as the cluster's public URL, as a load balancer's would
# be: tokens are for it, and file links point at it.
public="http://127.0.0.1:$base"
for i in 0 1; do
    "$bin" gateway --etcd "$endpoints" --uploads "$blobs" --listen "127.0.0.1:$((base + i))" \
        --public-url "$public" --dev-key "$key" >"$dir/logs/gateway-$i.log" 2>&1 &
    pids+=($!)
    names+=("gateway-$i")
done
for i in 0 1; do
    wait_for "gateway $i" curl -fsS "http://127.0.0.1:$((base + i))/readyz"
done

cat <<TEXT
agentprocess cluster on loopback ($dir)
  etcd:        $endpoints
  actor hosts: $actors, gRPC from http://127.0.0.1:$((base + 10))
  schedulers:  2 (one leads)
  MCP:         http://127.0.0.1:$base/mcp
               http://127.0.0.1:$((base + 1))/mcp
Tokens (dev mode; every gateway accepts them):
  $bin token --dev-key $key --url $public --org ORG --agent AGENT_ID
  $bin token --dev-key $key --url $public --org ORG --person EMAIL --group GROUP [--operator]
Logs in $dir/logs. Ctrl-C stops everything.
TEXT
# Until Ctrl-C: say when a process ends (killing one is how to watch the cluster cope).
declare -A reported=()
while sleep 1; do
    for i in "${!pids[@]}"; do
        if [ -z "${reported[$i]:-}" ] && ! kill -0 "${pids[$i]}" 2>/dev/null; then
            reported[$i]=1
            echo "${names[$i]} (pid ${pids[$i]}) ended; see $dir/logs/${names[$i]}.log" >&2
        fi
    done
done
