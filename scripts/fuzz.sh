#!/usr/bin/env bash
# Fuzzes the process crate: each target runs SECONDS (default 60) from the committed seeds.
#
#   scripts/fuzz.sh [SECONDS]
#
# Exits non-zero if any target finds a crash, a panic, a timeout (5 s per input) or runs out of
# memory (2 GiB). Findings are kept under process/fuzz/artifacts/<target>/ for reproduction:
#   cd process && cargo fuzz run --sanitizer none <target> fuzz/artifacts/<target>/<file>
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
    echo "usage: $0 [SECONDS]" >&2
    exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fuzz_dir="$root/process/fuzz"

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install --locked cargo-fuzz
fi

# Stable Rust only: no sanitizer, because AddressSanitizer needs nightly's -Zsanitizer. The crate
# forbids unsafe code, so the fuzzer looks for panics, hangs and memory blow-ups, which it finds
# without a sanitizer.
sanitizer=(--sanitizer none)

corpus_root="$(mktemp -d)"
trap 'rm -rf "$corpus_root"' EXIT

targets=(parse load)
failed=()
cd "$root/process"
for target in "${targets[@]}"; do
    corpus="$corpus_root/$target"
    mkdir -p "$corpus"
    cp "$fuzz_dir"/seeds/* "$corpus"/
    echo "== fuzzing $target for ${seconds}s"
    log="$corpus_root/$target.log"
    if cargo fuzz run "${sanitizer[@]}" --debug-assertions "$target" "$corpus" -- \
        -max_total_time="$seconds" \
        -timeout=5 \
        -rss_limit_mb=2048 \
        -max_len=65536 \
        -dict="$fuzz_dir/yaml.dict" \
        -print_final_stats=1 >"$log" 2>&1; then
        # The progress lines are noise once the run is clean: keep the build errors and totals.
        grep -E '^(error|Done|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb)' "$log" || true
    else
        tail -n 60 "$log"
        failed+=("$target")
    fi
done

if [ "${#failed[@]}" -ne 0 ]; then
    echo "fuzzing found problems in: ${failed[*]} (see process/fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzzing found nothing in: ${targets[*]}"
