#!/usr/bin/env bash
# Builds (release) and runs agentprocess with the given arguments: `scripts/run.sh serve`.
# Installs first what a machine with only Rust and a C compiler lacks to build it: the protobuf
# compiler (`protoc`), which the etcd client's build runs to compile etcd's gRPC definitions.
# It uses apt (through sudo when not root); without apt it says what to install and stops.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

fail() {
    echo "scripts/run.sh: $*" >&2
    exit 1
}

if ! command -v protoc >/dev/null 2>&1 && [ -z "${PROTOC:-}" ]; then
    command -v apt-get >/dev/null 2>&1 ||
        fail "building needs protoc, the protobuf compiler, and there is no apt-get here to install it; install protoc (or set PROTOC to its path) and run again"
    sudo_cmd=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 ||
            fail "building needs protoc, the protobuf compiler; installing it (apt-get install protobuf-compiler) needs root or sudo"
        sudo_cmd=(sudo)
    fi
    echo "scripts/run.sh: installing protoc (apt package protobuf-compiler), which the build needs" >&2
    "${sudo_cmd[@]}" apt-get update -qq ||
        fail "apt-get update failed; install protoc (apt package protobuf-compiler) and run again"
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null ||
        fail "apt-get install protobuf-compiler failed; install protoc and run again"
    # apt puts it in /usr/bin, which a narrowed PATH may leave out: the build finds it by PROTOC.
    if ! command -v protoc >/dev/null 2>&1; then
        [ -x /usr/bin/protoc ] || fail "protobuf-compiler is installed but protoc is not in /usr/bin; set PROTOC to its path"
        export PROTOC=/usr/bin/protoc
    fi
fi

exec cargo run --release --manifest-path "$root/Cargo.toml" -- "$@"
