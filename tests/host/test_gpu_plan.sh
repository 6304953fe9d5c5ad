#!/usr/bin/env bash
# The GPU suite's plan (tests/gpu/run.sh --list for an H100's capability, whatever card is present): every
# part has variants; SNN_GPU_PARTS and SNN_GPU_ONLY keep what they name; a pattern naming nothing is refused.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=$(mktemp -d) # the plan writes each variant's defconfig
trap 'rm -rf "$OUT"' EXIT
list() {
    env -u SNN_GPU_ONLY -u SNN_GPU_PARTS SNN_GPU_CC=90 SNN_TEST_TIER=test SNN_TEST_OUT="$OUT" "$@" \
        bash tests/gpu/run.sh --list 2>&1
}
verdict() { # OK WHAT
    if [ "$1" = 0 ]; then echo "ok - gpu plan: $2"; else echo "not ok - gpu plan: $2"; fi
}

out=$(list); rc=$?
missing=
for part in boards others precisions wgmma strategies fused dp; do
    grep -q "^$part: [^ ]" <<<"$out" || missing+=" $part"
done
[ $rc -eq 0 ] && [ -z "$missing" ]; verdict $? "every part of the test tier has variants${missing:+ (none in$missing)}"

out=$(list SNN_GPU_PARTS=fused SNN_GPU_ONLY='h100_784x4_b64*'); rc=$?
[ $rc -eq 0 ] && [ "$(grep -v '^#' <<<"$out")" = "fused: h100_784x4_b64 h100_784x4_b64-layered" ]
verdict $? "SNN_GPU_ONLY keeps the variants its pattern names, a board and its layered twin: $(grep -v '^#' <<<"$out")"

out=$(list SNN_GPU_PARTS=fused SNN_GPU_ONLY='widths-* fused-sm80-fp32-36x2-b17'); rc=$?
[ $rc -eq 0 ] && [ "$(grep -v '^#' <<<"$out")" = "fused: fused-sm80-fp32-36x2-b17 widths-host widths-fused-sm90-bf16" ]
verdict $? "SNN_GPU_ONLY takes several patterns, a whole name matching only itself: $(grep -v '^#' <<<"$out")"

out=$(list SNN_GPU_PARTS=fused SNN_GPU_ONLY='no-such-variant*'); rc=$?
[ $rc -eq 2 ] && [ "$(grep -c . <<<"$out")" -eq 1 ] && grep -q "names no variant" <<<"$out"
ok=$?
verdict $ok "a pattern that names no variant is one line, exit 2$([ $ok = 0 ] || echo " (status $rc: $out)")"
