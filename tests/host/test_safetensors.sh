#!/usr/bin/env bash
# test_safetensors.sh DRIVER: the safetensors reader on good and malformed
# files. DRIVER is test_safetensors: with no argument it runs its round
# trips; given files it reads each, printing "ok NAME: N tensors" or the
# reader's message and exiting 1. Each malformed file must be refused with
# a message naming its defect. Prints one ok / not ok line per case, exits 0.
set -u
driver=${1:-}
if [[ -z $driver || ! -x $driver ]]; then
    echo "not ok - safetensors: driver '${driver}' missing or not executable"
    exit 0
fi
python=$(command -v python3 || command -v /usr/bin/python3) || {
    echo "skip - safetensors: no python3 to write the test files"
    exit 0
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/snn-st.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$driver"

# Each case: a file NAME and the words its refusal must contain (a file
# whose words are "ok" must be accepted). Written by Python's struct + json,
# independently of the reader.
"$python" - "$tmp" <<'PY' || { echo "not ok - safetensors: writing the test files failed"; exit 0; }
import json, struct, sys, os
root = sys.argv[1]
cases = []

def header(h, pad=True):
    text = json.dumps(h, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return text

def write(name, expect, raw):
    with open(os.path.join(root, name), "wb") as f:
        f.write(raw)
    cases.append((name, expect))

def st(name, expect, h, data, length=None, pad=True):
    text = header(h, pad)
    n = len(text) if length is None else length
    write(name, expect, struct.pack("<Q", n) + text + data)

t = lambda dtype, shape, a, b: {"dtype": dtype, "shape": shape, "data_offsets": [a, b]}
f32 = struct.pack("<6f", *range(6))
st("good", "ok", {"__metadata__": {"k": "v"}, "a": t("F32", [2, 3], 0, 24)}, f32)
st("good-unpadded", "ok", {"a": t("F32", [2, 3], 0, 24)}, f32, pad=False)
st("good-empty", "ok", {}, b"")
st("good-no-data", "ok", {"a": t("F32", [0, 5], 0, 0)}, b"")
st("good-unsorted-keys", "ok", {"b": t("F32", [3], 12, 24), "a": t("F32", [3], 0, 12)}, f32)
write("empty-file", "too short", b"")
write("short-file", "too short", b"\x10\x00\x00")
st("length-past-file", "runs past the end of the file", {"a": t("F32", [6], 0, 24)}, f32, length=4096)
st("huge-length", "above the format's limit", {}, b"", length=1 << 62)
write("not-json", "not valid JSON", struct.pack("<Q", 8) + b"{nope!!}")
write("not-object", "not a JSON object", struct.pack("<Q", 8) + b"[1,2,3] ")
write("two-values", "bytes after its JSON object", struct.pack("<Q", 8) + b"{}{}    ")
write("nul-in-header", "bytes after its JSON object", struct.pack("<Q", 8) + b"{}\x00     ")
st("past-data", "run past the data's 24 bytes", {"a": t("F32", [8], 0, 32)}, f32)
st("overlap", "overlaps", {"a": t("F32", [4], 0, 16), "b": t("F32", [4], 8, 24)}, f32)
st("gap", "a gap in the data", {"a": t("F32", [2], 0, 8), "b": t("F32", [2], 16, 24)}, f32)
st("tail", "belong to no tensor", {"a": t("F32", [4], 0, 16)}, f32)
st("reversed", "end before they begin", {"a": t("F32", [0], 24, 0)}, f32)
st("unknown-dtype", "unknown dtype 'F31'", {"a": t("F31", [6], 0, 24)}, f32)
st("dtype-number", "unknown dtype (not a string)", {"a": {"dtype": 4, "shape": [6], "data_offsets": [0, 24]}}, f32)
st("shape-mismatch", "does not fill its data_offsets' 24 bytes", {"a": t("F32", [5], 0, 24)}, f32)
st("shape-negative", "shape entry 0 is not a whole number", {"a": t("F32", [-6], 0, 24)}, f32)
st("shape-fraction", "number at byte 39 is not a plain whole number", {"a": t("F32", [2, 1.5], 0, 24)}, f32)
st("shape-overflow", "does not fill", {"a": t("F32", [2**40, 2**40, 2**30], 0, 24)}, f32)
st("shape-not-array", "shape is not an array", {"a": {"dtype": "F32", "shape": 6, "data_offsets": [0, 24]}}, f32)
st("offsets-three", "data_offsets is not [begin, end]", {"a": {"dtype": "F32", "shape": [6], "data_offsets": [0, 12, 24]}}, f32)
st("missing-offsets", "no 'data_offsets'", {"a": {"dtype": "F32", "shape": [6]}}, f32)
st("extra-key", "unknown key 'stride'", {"a": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24], "stride": 1}}, f32)
st("entry-not-object", "its entry is not a JSON object", {"a": [0, 24]}, f32)
st("metadata-number", "'epoch' is not a string", {"__metadata__": {"epoch": 3}, "a": t("F32", [6], 0, 24)}, f32)
write("duplicate-name", "appears twice", struct.pack("<Q", 120) +
      b'{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"a":{"dtype":"F32","shape":[3],"data_offsets":[12,24]}}'.ljust(120) + f32)
st("empty-name", "empty or holds control characters", {"": t("F32", [6], 0, 24)}, f32)
def raw(name, expect, text):
    text = text.encode() if isinstance(text, str) else text
    text += b" " * (-len(text) % 8)
    write(name, expect, struct.pack("<Q", len(text)) + text + f32)
raw("leading-zero", "number at byte 37 is not a plain whole number", '{"a":{"dtype":"F32","shape":[06],"data_offsets":[0,24]}}')
raw("fraction-shape", "is not a plain whole number", '{"a":{"dtype":"F32","shape":[6.0],"data_offsets":[0,24]}}')
raw("exponent-offset", "is not a plain whole number", '{"a":{"dtype":"F32","shape":[6],"data_offsets":[0,2.4e1]}}')
raw("not-utf8", "the header is not UTF-8", b'{"a\xff":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}}')
raw("overlong-utf8", "the header is not UTF-8", b'{"a\xc0\xaf":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}}')
raw("nul-escape", "holds a \\u0000 escape", '{"a\\u0000b":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}}')
raw("metadata-twice", "__metadata__ 'k' appears twice", '{"__metadata__":{"k":"1","k":"2"},"a":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}}')
raw("good-utf8-name", "ok", '{"\u00e9t\u00e9":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}}')
with open(os.path.join(root, "cases"), "w") as f:
    for name, expect in cases:
        f.write(f"{name}\t{expect}\n")
PY

# expect_read WHAT EXPECT PATH [SECONDS]: the driver reads PATH (under a 5 s
# timeout: exit 124 or 137 is a reader that waited) and accepts it (EXPECT
# "ok") or refuses it in one line holding EXPECT, within SECONDS if given.
expect_read() {
    local what=$1 expect=$2 path=$3 budget=${4:-} out rc t0=$EPOCHREALTIME secs
    out=$(timeout -k 1 5 "$driver" "$path" 2>&1); rc=$?
    secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
    if [[ -n $budget ]] && awk -v t="$secs" -v m="$budget" 'BEGIN { exit !(t > m) }'; then
        echo "not ok - safetensors: $what: took $secs s, over its $budget s budget (exit $rc: $out)"
    elif [[ $expect == ok ]]; then
        if [[ $rc -eq 0 && $out == "ok "* ]]; then echo "ok - safetensors: $what accepted"
        else echo "not ok - safetensors: $what refused: exit $rc: $out"; fi
    elif [[ $rc -eq 1 && $(wc -l <<<"$out") -eq 1 && $out == *"$path: "*"$expect"* ]]; then
        echo "ok - safetensors: $what refused${budget:+ in $secs s}: ${out#*"$path: "}"
    else
        echo "not ok - safetensors: $what: wanted one line with '$expect', exit 1; got exit $rc: $out"
    fi
}
# Each case as a file, and through a pipe (process substitution), which is
# read in stages without knowing its length: the same verdict.
while IFS=$'\t' read -r name expect; do
    expect_read "$name" "$expect" "$tmp/$name"
    expect_read "$name through a pipe" "$expect" <(cat "$tmp/$name")
done <"$tmp/cases"

# Inputs that are not regular files: a FIFO with no writer reads as empty
# (open() does not wait for a writer); a pipe with a file's bytes reads as
# the file does.
mkfifo "$tmp/fifo"
expect_read "a FIFO with no writer" "0 bytes (a FIFO or pipe with no writer?): too short" "$tmp/fifo"

# What is read is what the header allows, each stage checked before the
# next (0.5 s budgets; reading all of it took seconds, or never ended): a
# sparse 3 GiB file whose header length is 2^63; a FIFO fed by yes (its
# first 8 bytes, "y\ny\ny\ny\n", a length far above the limit); a good
# header and its 24 bytes of data followed by yes.
printf '\0\0\0\0\0\0\0\200' >"$tmp/sparse" && truncate -s 3G "$tmp/sparse"
expect_read "a 3 GiB sparse file whose header length is 2^63" \
    "header length 9223372036854775808 is above the format's limit" "$tmp/sparse" 0.5
mkfifo "$tmp/yes"
exec 3<>"$tmp/yes" # a reader, so that yes's open does not wait for the driver's
yes >"$tmp/yes" &
yes_pid=$!
expect_read "a FIFO fed by yes" "header length 754645927544294009 is above the format's limit" "$tmp/yes" 0.5
exec 3<&-
kill "$yes_pid" 2>/dev/null
wait "$yes_pid" 2>/dev/null
expect_read "a good header and its data, then yes, through a pipe" \
    "more than 65536 bytes after the last tensor's data belong to no tensor" <(cat "$tmp/good"; yes) 0.5
rm -f "$tmp/sparse"
exit 0
