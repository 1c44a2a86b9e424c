#!/usr/bin/env bash
# fuzz.sh BUILD_DIR SECONDS - runs every libFuzzer target in BUILD_DIR for
# SECONDS each, seeded from tests/fuzz/corpus/NAME (read-only: new inputs go
# to a temporary corpus). A crash is kept under tests/fuzz/crashes/ to become
# a regression input, and makes the script fail. SECONDS 0 replays the seed
# corpus once (deterministic; what `make test` runs).
set -u
build=${1:-build-fuzz}
secs=${2:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/tests/fuzz/crashes"
failed=0
ran=0
for bin in "$build"/fuzz_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin")
    seeds="$root/tests/fuzz/corpus/${name#fuzz_}"
    work=$(mktemp -d)
    args=("$work")
    [ -d "$seeds" ] && args+=("$seeds")
    if [ "$secs" -eq 0 ]; then
        [ -d "$seeds" ] || continue
        printf '%-16s replay %s ... ' "$name" "$(ls "$seeds" | wc -l) inputs"
        limit=(-runs=0)
        args=("$seeds")
    else
        printf '%-16s %3ss ... ' "$name" "$secs"
        limit=(-max_total_time="$secs")
    fi
    if "$bin" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$root/tests/fuzz/crashes/$name-" "${args[@]}" >"$work.log" 2>&1; then
        echo "ok ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$work.log" | awk '{print $2}') runs)"
        ran=$((ran + 1))
    else
        echo "FAILED (see tests/fuzz/crashes/$name-*)"
        tail -30 "$work.log"
        failed=$((failed + 1))
    fi
    rm -rf "$work" "$work.log"
done
echo "$ran passed, $failed failed"
[ "$failed" -eq 0 ]
