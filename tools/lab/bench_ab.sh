#!/usr/bin/env bash
# Epoch times of two source trees in one GPU call, for a before/after
# comparison that is not confounded by another card or another call:
#   tools/lab/bench_ab.sh OUT BEFORE_DIR BEFORE_BOARDS AFTER_DIR AFTER_BOARDS [ROUNDS]
# Each DIR is a whole source tree with its dataset in data/mnist (e.g.
# git archive REV | tar -x -C DIR); BOARDS a comma-separated list of its board
# names. Both trees' boards are built in parallel, then tools/bench.py
# --skip-torch runs in each tree, alternately, ROUNDS (2) times; OUT gets each
# round's bench.md and a table of all rounds last.
set -u
[ $# -ge 5 ] || { echo "usage: tools/lab/bench_ab.sh OUT BEFORE_DIR BEFORE_BOARDS AFTER_DIR AFTER_BOARDS [ROUNDS]" >&2; exit 2; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd) rounds=${6:-2}
declare -A dir=([before]=$(cd "$2" && pwd) [after]=$(cd "$4" && pwd)) boards=([before]=$3 [after]=$5)
export PYTHONUNBUFFERED=1
build() { # before|after
    local b
    for b in ${boards[$1]//,/ }; do
        (cd "${dir[$1]}" && make O=build/bench/$b ${b}_defconfig >/dev/null &&
            make O=build/bench/$b -j"$(($(nproc) / 2))" build/bench/$b/app/mnist) >"$OUT/build-$1-$b.log" 2>&1 ||
            echo "bench_ab: $1 $b did not build (see $OUT/build-$1-$b.log)"
    done
}
build before & build after & wait
for r in $(seq "$rounds"); do
    for t in before after; do
        (cd "${dir[$t]}" && python3 tools/bench.py --out "$OUT/$t-$r" --skip-torch --configs "${boards[$t]}" >/dev/null 2>&1) ||
            echo "bench_ab: $t round $r failed (see $OUT/$t-$r)"
    done
done
for r in $(seq "$rounds"); do for t in before after; do
    echo "== $t, round $r"; grep '^| ' "$OUT/$t-$r/bench.md" 2>/dev/null | cut -d'|' -f2,3,8
done; done
