#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test agentprocess: the protobuf compiler
# (gRPC code generation), etcd 3.4 and etcdctl (the etcd store's tests start a real cluster), the Rust
# components the checks use, cargo-fuzz, a Python venv at target/py-venv with
# tests/python/requirements.txt (the official MCP Python SDK the tests drive, and Playwright),
# Debian's chromium for Playwright to drive (it cannot download browsers of its own here), axe-core
# and oidc-provider at target/ui-test-deps (the web UI's tests: accessibility, and an OpenID
# provider to sign in with), the MCP TypeScript SDK at target/mcp-ts-sdk, and Node with the MCP
# Inspector the README's recipe names, in npx's cache.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/target/py-venv"

need_apt=()
command -v protoc >/dev/null 2>&1 || need_apt+=(protobuf-compiler)
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
# etcdctl: the cluster backup test saves and restores an etcd snapshot as an operator would.
command -v etcdctl >/dev/null 2>&1 || need_apt+=(etcd-client)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
# The README's MCP Inspector recipe is tested as written, through npx.
command -v npx >/dev/null 2>&1 || need_apt+=(nodejs npm)
# The web UI's browser tests launch this one (tests/python/ui_browser.py).
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
# `python3 -m venv` needs Debian's python3-venv (ensurepip) on some systems.
if [ ! -x "$venv/bin/python" ] && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    need_apt+=(python3-venv)
fi
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

if [ ! -x "$venv/bin/python" ]; then
    echo "creating a Python venv at target/py-venv"
    mkdir -p "$root/target"
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$root/tests/python/requirements.txt"

# The web UI tests' Node packages: axe-core, injected into the pages by tests/python/ui_browser.py,
# and oidc-provider, the OpenID provider tests/oidc/provider.mjs runs on loopback.
ui_deps="$root/target/ui-test-deps"
if [ ! -f "$ui_deps/node_modules/axe-core/axe.min.js" ] || [ ! -d "$ui_deps/node_modules/oidc-provider" ]; then
    npm install --prefix "$ui_deps" --no-audit --no-fund --silent axe-core@4.14.1 oidc-provider@9.13.3
fi

# The official MCP TypeScript SDK, which tests/serve_typescript_sdk.rs drives (tests/js/walk.mjs).
ts_sdk="$root/target/mcp-ts-sdk"
if [ ! -f "$ts_sdk/node_modules/@modelcontextprotocol/sdk/package.json" ] \
    || ! grep -q '"version": "1.32.2"' "$ts_sdk/node_modules/@modelcontextprotocol/sdk/package.json"; then
    npm install --prefix "$ts_sdk" --no-audit --no-fund --silent @modelcontextprotocol/sdk@1.32.2
fi

# The Inspector version the README pins, fetched once so the test that runs the recipe does not.
npm exec --yes --package=@modelcontextprotocol/inspector@2.12.0 -- node -e 0
