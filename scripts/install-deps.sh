#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test agentprocess: the protobuf compiler
# (gRPC code generation), the Rust components the checks use, and cargo-fuzz.
set -euo pipefail

need_apt=()
command -v protoc >/dev/null 2>&1 || need_apt+=(protobuf-compiler)
if ((${#need_apt[@]})); then
    echo "installing system packages: ${need_apt[*]}"
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if command -v rustup >/dev/null 2>&1; then
    installed=$(rustup component list --installed 2>/dev/null || true)
    for component in rustfmt clippy; do
        grep -q "^$component" <<<"$installed" || rustup component add "$component"
    done
fi

command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
