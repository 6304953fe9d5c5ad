#!/usr/bin/env bash
# test_fuzz.sh [OUT]: builds the libFuzzer targets (ASan, UBSan) into OUT
# (default $SNN_TEST_OUT/fuzz): tests/fuzz/fuzz_idx.c, the IDX reader, and
# tests/fuzz/fuzz_image.c, the image decoders and the digit recipe, and
# tests/fuzz/fuzz_safetensors.c, the model files' reader. Each runs every
# seed of its corpus (tests/fuzz/corpus_NAME) once, then fuzzes a copy of
# it, so that the repository's stays as it is, for $SNN_FUZZ_SECONDS (20);
# they run side by side, so the whole takes about that long. Prints one
# ok / not ok / skip line per check, target by target, and exits 0; a crash's
# input is kept in OUT/NAME/artifacts.
set -u
out=${1:-}
[[ -z $out || $out == /* ]] || out=$PWD/$out # OUT is relative to the caller
cd "$(dirname "$0")/../.." || exit 0
out=${out:-${SNN_TEST_OUT:-build/test}/fuzz}
cflags=(-g -O1 "-fsanitize=fuzzer,address,undefined" -fno-sanitize-recover=all)
seconds=${SNN_FUZZ_SECONDS:-20}
mkdir -p "$out" || { echo "not ok - fuzz: cannot create $out"; exit 0; }

# Debian packages libFuzzer apart from clang (libclang-rt-14-dev): try both.
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' >"$out/probe.c"
if ! clang "${cflags[@]}" "$out/probe.c" -o "$out/probe" >"$out/probe.log" 2>&1; then
    echo "skip - idx fuzz: skipped: no clang with libFuzzer (tools/setup.sh installs it)"
    echo "skip - image fuzz: skipped: no clang with libFuzzer (tools/setup.sh installs it)"
    echo "skip - safetensors fuzz: skipped: no clang with libFuzzer (tools/setup.sh installs it)"
    exit 0
fi

# fuzz NAME DIR WHAT LOG OPTION...: runs DIR/fuzz_NAME over DIR/corpus, WHAT
# saying how in the verdict; true if clean.
fuzz() {
    local name=$1 dir=$2 what_run=$3 log=$4 rc units what unit
    shift 4
    "$dir/fuzz_$name" -print_final_stats=1 -artifact_prefix="$dir/artifacts/" -max_len=65536 -timeout=10 \
        -rss_limit_mb=2048 "$@" "$dir/corpus" >"$log" 2>&1
    rc=$?
    if [[ $rc -eq 0 ]]; then
        units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        echo "ok - $name fuzz: $what_run (${units:-?} executions, no sanitizer report)"
        return 0
    fi
    # The first report line (sanitizer, timeout, out of memory) and the saved input.
    what=$(grep -m1 -E 'ERROR: |runtime error: |fuzz_[a-z]+: ' "$log" | sed 's/^==[0-9]*==//; s/ on address .*//')
    unit=$(sed -n 's/.*Test unit written to \(.*\)/\1/p' "$log" | tail -n 1)
    echo "not ok - $name fuzz: $what_run: ${what:-exit status $rc}; ${unit:+crash input $unit; }log $log"
    tail -n 20 "$log" | sed 's/^/    /'
    return 1
}

# target NAME SOURCES-AND-LIBS...: builds, runs the seeds, fuzzes.
target() {
    local name=$1 dir=$out/$1 dict=() seeds
    shift
    mkdir -p "$dir" || { echo "not ok - $name fuzz: cannot create $dir"; return; }
    if ! clang "${cflags[@]}" -I. -Iinclude "$@" -o "$dir/fuzz_$name" >"$dir/build.log" 2>&1; then
        echo "not ok - $name fuzz: build failed: see $dir/build.log"
        tail -n 20 "$dir/build.log" | sed 's/^/    /'
        return
    fi
    rm -rf "$dir/corpus" "$dir/artifacts"
    if ! cp -r "tests/fuzz/corpus_$name" "$dir/corpus" || ! mkdir "$dir/artifacts"; then
        echo "not ok - $name fuzz: cannot copy the corpus to $dir"
        return
    fi
    [[ -f tests/fuzz/$name.dict ]] && dict=(-dict="tests/fuzz/$name.dict")
    seeds=(tests/fuzz/corpus_"$name"/*)
    fuzz "$name" "$dir" "${#seeds[@]} seeds run once" "$dir/seeds.log" -runs=0 "${dict[@]}" || return
    fuzz "$name" "$dir" "$seconds s of fuzzing" "$dir/fuzz.log" -max_total_time="$seconds" "${dict[@]}"
}

target idx tests/fuzz/fuzz_idx.c data/idx.c data/input.c -lz >"$out/idx.verdict" 2>&1 &
target image tests/fuzz/fuzz_image.c data/image.c data/input.c data/image_png.c data/image_pnm.c data/digit.c -lpng -lz \
    >"$out/image.verdict" 2>&1 &
target safetensors tests/fuzz/fuzz_safetensors.c data/safetensors.c data/input.c -lcjson >"$out/safetensors.verdict" 2>&1 &
wait
cat "$out/idx.verdict" "$out/image.verdict" "$out/safetensors.verdict"
exit 0
