#!/usr/bin/env bash
# Runs every check and test of the workspace, installing what a fresh machine lacks first.
#   FUZZ_SECONDS  seconds per fuzz target (default 60; 0 skips fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."

# One clean build per run: incremental caches would double the target folder for no gain here.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

scripts/install-deps.sh

echo "== format"
cargo fmt --all -- --check

echo "== lints"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== fuzz (${FUZZ_SECONDS:-60}s per target)"
if [ "${FUZZ_SECONDS:-60}" -gt 0 ]; then
    scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
fi

echo "== tests"
# Libraries, binaries and tests; benchmarks are built by clippy above and run on their own.
cargo test --workspace --lib --bins --tests --locked
