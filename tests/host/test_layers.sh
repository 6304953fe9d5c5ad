#!/usr/bin/env bash
# The include graph of the engine against tests/layers, the allowed edges:
# one line per layer, "not ok" with file and line for each edge not listed.
set -u
cd "$(dirname "$0")/../.."
declare -A allowed
while read -r from arrow to; do
    [[ -z $from || $from == \#* ]] && continue
    [[ $arrow == '->' ]] || { echo "not ok - layers: tests/layers: a line without '->': $from $arrow $to"; exit 0; }
    allowed[$from]=" $to "
done <tests/layers
for layer in app nn kernels mm data arch; do
    [[ -v allowed[$layer] ]] || { echo "not ok - layers: tests/layers has no line for $layer"; continue; }
    bad=$(grep -rnE '^\s*#\s*include\s+"[a-z_]+/' "$layer" --include='*.c' --include='*.h' --include='*.cu' \
        --include='*.cuh' | while IFS= read -r hit; do
        to=$(sed -E 's/.*#\s*include\s+"([a-z_]+)\/.*/\1/' <<<"${hit#*:*:}")
        [[ $to == "$layer" || ${allowed[$layer]} == *" $to "* ]] || echo "    ${hit%%:*}:$(cut -d: -f2 <<<"$hit"): $layer -> $to"
    done)
    only=$(xargs <<<"${allowed[$layer]}")
    if [[ -z $bad ]]; then echo "ok - layers: $layer includes only from ${only:-the configuration}${only:+ and the configuration}"
    else echo "not ok - layers: $layer includes from a layer it may not (tests/layers):"; echo "$bad"; fi
done
