#!/usr/bin/env bash
# test_fuzz.sh [OUT]: builds tests/fuzz/fuzz_idx.c (libFuzzer, ASan, UBSan)
# into OUT (default $SNN_TEST_OUT/fuzz), runs every seed once, then fuzzes a
# copy of the seed corpus, so that the repository's stays as it is, for
# $SNN_FUZZ_SECONDS (20). Prints one ok / not ok / skip line per check and
# exits 0; a crash's input is kept in OUT/artifacts.
set -u
out=${1:-}
[[ -z $out || $out == /* ]] || out=$PWD/$out # OUT is relative to the caller
cd "$(dirname "$0")/../.." || exit 0
out=${out:-${SNN_TEST_OUT:-build/test}/fuzz}
cflags=(-g -O1 "-fsanitize=fuzzer,address,undefined" -fno-sanitize-recover=all)
mkdir -p "$out" || { echo "not ok - idx fuzz: cannot create $out"; exit 0; }

# Debian packages libFuzzer apart from clang (libclang-rt-14-dev): try both.
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' >"$out/probe.c"
if ! clang "${cflags[@]}" "$out/probe.c" -o "$out/probe" >"$out/probe.log" 2>&1; then
    echo "skip - idx fuzz: skipped: no clang with libFuzzer (tools/setup.sh installs it)"
    exit 0
fi
if ! clang "${cflags[@]}" -I. -Iinclude tests/fuzz/fuzz_idx.c data/idx.c -lz -o "$out/fuzz_idx" \
    >"$out/build.log" 2>&1; then
    echo "not ok - idx fuzz: build failed: see $out/build.log"
    tail -n 20 "$out/build.log" | sed 's/^/    /'
    exit 0
fi

rm -rf "$out/corpus" "$out/artifacts"
if ! cp -r tests/fuzz/corpus_idx "$out/corpus" || ! mkdir "$out/artifacts"; then
    echo "not ok - idx fuzz: cannot copy the corpus to $out"
    exit 0
fi

# fuzz NAME LOG OPTION...: runs the fuzzer over the copy; true if clean.
fuzz() {
    local name=$1 log=$2 rc units what unit
    shift 2
    "$out/fuzz_idx" -print_final_stats=1 -artifact_prefix="$out/artifacts/" -max_len=65536 -timeout=10 \
        -rss_limit_mb=2048 "$@" "$out/corpus" >"$log" 2>&1
    rc=$?
    if [[ $rc -eq 0 ]]; then
        units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        echo "ok - idx fuzz: $name (${units:-?} executions, no sanitizer report)"
        return 0
    fi
    # The first report line (sanitizer, timeout, out of memory) and the saved input.
    what=$(grep -m1 -E 'ERROR: |runtime error: ' "$log" | sed 's/^==[0-9]*==//; s/ on address .*//')
    unit=$(sed -n 's/.*Test unit written to \(.*\)/\1/p' "$log" | tail -n 1)
    echo "not ok - idx fuzz: $name: ${what:-exit status $rc}; ${unit:+crash input $unit; }log $log"
    tail -n 20 "$log" | sed 's/^/    /'
    return 1
}

seeds=(tests/fuzz/corpus_idx/*)
fuzz "${#seeds[@]} seeds run once" "$out/seeds.log" -runs=0 &&
    fuzz "${SNN_FUZZ_SECONDS:-20} s of fuzzing" "$out/fuzz.log" -max_total_time="${SNN_FUZZ_SECONDS:-20}"
exit 0
