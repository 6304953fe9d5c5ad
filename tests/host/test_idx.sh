#!/usr/bin/env bash
# test_idx.sh DRIVER: the IDX loader on good and malformed files.
#
# DRIVER is test_idx_load: it loads a directory and prints "loaded", or
# "mnist: error: ..." on stderr and exits 1. Synthetic files of the real sizes
# are written once; each case is a directory of links to the good files with
# one file replaced. Prints one ok / not ok line per case, exits 0.
set -u

driver=${1:-}
if [[ -z $driver || ! -x $driver ]]; then
    echo "not ok - idx: driver '${driver}' missing or not executable"
    exit 0
fi
python=$(command -v python3 || command -v /usr/bin/python3) || {
    echo "skip - idx: no python3 to write the test files"
    exit 0
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/snn-idx.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# good/: the four raw files; gz/: the same gzipped; bad/: one file per defect.
"$python" - "$tmp" <<'EOF' || { echo "not ok - idx: writing the test files failed"; exit 0; }
import gzip, os, struct, sys, zlib

root = sys.argv[1]
for d in ("good", "gz", "bad"):
    os.mkdir(os.path.join(root, d))

def images(n, rows=28, cols=28, magic=0x803):
    return struct.pack(">IIII", magic, n, rows, cols) + os.urandom(n * rows * cols)

def labels(n, magic=0x801):
    return struct.pack(">II", magic, n) + bytes(b % 10 for b in os.urandom(n))

def gz(data, level=1):
    return gzip.compress(data, compresslevel=level, mtime=0)

def write(sub, name, data):
    with open(os.path.join(root, sub, name), "wb") as f:
        f.write(data)

good = {
    "train-images-idx3-ubyte": images(60000),
    "train-labels-idx1-ubyte": labels(60000),
    "t10k-images-idx3-ubyte": images(10000),
    "t10k-labels-idx1-ubyte": labels(10000),
}
for name, data in good.items():
    write("good", name, data)
    # Stored blocks for the largest: still gzip, and a second faster.
    write("gz", name + ".gz", gz(data, 0 if name.startswith("train-images") else 1))

ti, tl = good["t10k-images-idx3-ubyte"], good["t10k-labels-idx1-ubyte"]
ti_gz = gz(ti)
out_of_range = bytearray(tl)
out_of_range[8 + 1234] = 10
bad_crc = bytearray(gz(tl))
bad_crc[-8] ^= 0xFF  # the CRC-32 in the gzip trailer
bad_deflate = bytearray(gz(tl))
bad_deflate[10] = 0xFF  # first deflate block header: reserved block type 3
bad = {
    "images_magic": images(10000, magic=0x801),
    "labels_magic": labels(10000, magic=0x803),
    "labels_magic.gz": gz(labels(10000, magic=0x803)),
    "images_dims": images(10000, 28, 32),
    "images_9000": images(9000),
    "labels_9000": labels(9000),
    "labels_9999": labels(9999),
    "train_labels_59999": labels(59999),
    "images_truncated": ti[:-1000],
    "images_truncated.gz": ti_gz[: len(ti_gz) // 2],
    "images_short_header": ti[:10],
    "labels_cut.gz": gz(tl)[:12],
    "labels_no_trailer.gz": gz(tl)[:-4],
    "empty": b"",
    "labels_trailing": tl + b"xyz",
    "labels_trailing.gz": gz(tl + b"xyz"),
    "labels_out_of_range": bytes(out_of_range),
    "labels_bad_crc.gz": bytes(bad_crc),
    "labels_bad_deflate.gz": bytes(bad_deflate),
    # gzip allows concatenated members; nothing else may follow one
    "labels_junk.gz": gz(tl) + b"junk",
    "labels_zeros.gz": gz(tl) + bytes(512),
    "labels_one_byte.gz": gz(tl) + b"\x1f",
    "labels_magic_only.gz": gz(tl) + b"\x1f\x8b",
    "labels_two_members.gz": gz(tl[:5000]) + gz(tl[5000:]),
    "labels_three_members.gz": gz(tl[:8]) + gz(tl[8:]) + gz(b""),
    "labels_member_junk.gz": gz(tl[:5000]) + gz(tl[5000:]) + b"junk",
    "labels_member_trailing.gz": gz(tl) + gz(b"xyz"),
}
for name, data in bad.items():
    write("bad", name, data)
# For test_idx.sh to cut: the test images gzipped, and with 2000 images
# zeroed but the original's trailer (its CRC-32 and length) kept.
changed = bytearray(ti)
changed[16 + 5000 * 784:16 + 7000 * 784] = bytes(2000 * 784)
write("bad", "images_whole.gz", ti_gz)
write("bad", "images_changed.gz", gz(bytes(changed))[:-8] + ti_gz[-8:])
# Gzip bombs: the labels and 64 MiB of zeros in one member (65 KB), and
# that followed by 159 members of 64 MiB of zeros: 10 GiB in 10 MB.
bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
zeros = bytes(64 << 20)
member = bomb.compress(tl) + bomb.compress(zeros) + bomb.flush()
write("bad", "labels_bomb.gz", member)
write("bad", "labels_bomb_10g.gz", member + gz(zeros, 9) * 159)
EOF

# mkcase NAME [TARGET=SOURCE]...: a directory of links to the good raw files
# where each TARGET (a standard name, .gz allowed) links to SOURCE instead:
# a file of bad/, or with a slash, a path under the temp dir; "-" removes
# TARGET, "dir" makes it a directory.
mkcase() {
    local dir=$tmp/case/$1 f
    shift
    mkdir -p "$dir"
    for f in "$tmp"/good/*; do ln -s "$f" "$dir/${f##*/}"; done
    for f in "$@"; do
        local target=${f%%=*} source=${f#*=}
        rm -f "$dir/${target%.gz}" "$dir/$target"
        case $source in
        -) ;;
        dir) mkdir "$dir/$target" ;;
        */*) ln -s "$tmp/$source" "$dir/$target" ;;
        *) ln -s "$tmp/bad/$source" "$dir/$target" ;;
        esac
    done
    echo "$dir"
}

# Every run under `timeout` (SIGKILL a second after its SIGTERM): a reader
# that waits forever (a FIFO) fails with exit status 124 or 137 rather than
# hanging the suite.
expect_ok() {
    local name=$1 dir=$2 out rc
    out=$(timeout -k 1 5 "$driver" "$dir" 2>&1)
    rc=$?
    if [[ $rc -eq 0 && $out == loaded ]]; then
        echo "ok - idx: $name"
    else
        echo "not ok - idx: $name: exit $rc: ${out//$'\n'/ }"
    fi
}

# expect_error NAME DIR FRAGMENT...: exit status 1 (an error, not a crash) and
# every fragment on stderr.
expect_error() {
    local name=$1 dir=$2 err rc frag
    shift 2
    err=$(timeout -k 1 5 "$driver" "$dir" 2>&1 >/dev/null)
    rc=$?
    if [[ $rc -ne 1 ]]; then
        echo "not ok - idx: $name: exit $rc, expected 1: ${err//$'\n'/ }"
        return
    fi
    for frag in "mnist: error: " "$@"; do
        if [[ $err != *"$frag"* ]]; then
            echo "not ok - idx: $name: message lacks '$frag': ${err//$'\n'/ }"
            return
        fi
    done
    echo "ok - idx: $name"
}

secs_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'; } # T0: seconds since

# expect_error_within SECONDS NAME DIR FRAGMENT...: expect_error, the
# loader done within SECONDS more than it took on the good gzip files
# ($gz_secs): a bomb refused early costs about what they do, one inflated
# whole seconds more; relative, so a sanitized build or a busy machine
# (0.43-0.58 s for one, against 0.5 s fixed) does not fail it.
expect_error_within() {
    local budget=$1 t0=$EPOCHREALTIME verdict secs
    shift
    verdict=$(expect_error "$@")
    secs=$(secs_since "$t0")
    if awk -v t="$secs" -v g="$gz_secs" -v m="$budget" 'BEGIN { exit !(t - g > m) }'; then
        echo "not ok - idx: $1: took $secs s, over the good gzip files' $gz_secs s by more than $budget s (${verdict#* - idx: })"
    else echo "$verdict ($secs s, the good gzip files $gz_secs s, budget $budget s more)"; fi
}

TI=t10k-images-idx3-ubyte
TL=t10k-labels-idx1-ubyte
expect_ok "good raw files load" "$tmp/good"
t0=$EPOCHREALTIME
expect_ok "good gzip files load" "$tmp/gz"
gz_secs=$(secs_since "$t0")
expect_ok "raw and gzip mixed" "$(mkcase mixed "$TI.gz=gz/$TI.gz" "$TL.gz=gz/$TL.gz")"
expect_ok "plain file named .gz" "$(mkcase plain_named_gz "$TL.gz=good/$TL")"

expect_error "wrong magic (images)" "$(mkcase images_magic "$TI=images_magic")" \
    "$TI: bad magic 0x00000801, expected 0x00000803" "this is a labels file"
expect_error "wrong magic (labels)" "$(mkcase labels_magic "$TL=labels_magic")" \
    "$TL: bad magic 0x00000803, expected 0x00000801" "this is an images file"
expect_error "wrong magic (labels, gzip)" "$(mkcase labels_magic_gz "$TL.gz=labels_magic.gz")" \
    "$TL.gz: bad magic 0x00000803, expected 0x00000801"
expect_error "wrong dimensions" "$(mkcase images_dims "$TI=images_dims")" \
    "$TI: images are 28x32, expected 28x28"
expect_error "count differs from the build's" "$(mkcase count "$TI=images_9000" "$TL=labels_9000")" \
    "$TI: has 9000 images, this build expects 10000"
expect_error "images/labels count mismatch (test)" "$(mkcase mismatch "$TL=labels_9999")" \
    "$TI and " "$TL disagree: images have 10000, labels have 9999"
expect_error "images/labels count mismatch (train)" \
    "$(mkcase train_mismatch "train-labels-idx1-ubyte=train_labels_59999")" \
    "train-labels-idx1-ubyte disagree: images have 60000, labels have 59999"
expect_error "truncated file (raw)" "$(mkcase truncated "$TI=images_truncated")" \
    "$TI: truncated after 9998 of 10000 images (1000 bytes short)"
expect_error "truncated file (gzip)" "$(mkcase truncated_gz "$TI.gz=images_truncated.gz")" \
    "$TI.gz: truncated after " " of 10000 images (" "gzip stream ends early"
expect_error "truncated header" "$(mkcase short_header "$TI=images_short_header")" \
    "$TI: truncated header: 10 of 16 bytes"
expect_error "truncated gzip (no data)" "$(mkcase cut_gz "$TL.gz=labels_cut.gz")" \
    "$TL.gz: truncated header: 0 of 8 bytes (gzip stream ends early)"
expect_error "truncated gzip (trailer missing)" "$(mkcase no_trailer_gz "$TL.gz=labels_no_trailer.gz")" \
    "$TL.gz: truncated: the gzip stream ends early after the 10000 labels"
expect_error "empty file" "$(mkcase empty "$TL=empty")" "$TL: empty file"
expect_error "trailing bytes (raw)" "$(mkcase trailing "$TL=labels_trailing")" \
    "$TL: 3 trailing bytes after the 10000 labels"
expect_error "trailing bytes (gzip)" "$(mkcase trailing_gz "$TL.gz=labels_trailing.gz")" \
    "$TL.gz: 3 trailing bytes after the 10000 labels"
expect_error "label out of range" "$(mkcase out_of_range "$TL=labels_out_of_range")" \
    "$TL: label 10 at index 1234 is out of range 0..9"
expect_error "corrupt gzip (bad deflate data)" "$(mkcase bad_deflate "$TL.gz=labels_bad_deflate.gz")" \
    "$TL.gz: corrupt gzip data (zlib: invalid block type)"
expect_error "corrupt gzip (bad CRC)" "$(mkcase bad_crc "$TL.gz=labels_bad_crc.gz")" \
    "$TL.gz: corrupt gzip data (zlib: incorrect data check)"
# The test images' gzip file cut by 1 to 9 bytes (its 8-byte trailer, then
# the deflate data's end), as it is and with 2000 images zeroed under the
# original's trailer: once its CRC-32 is whole, the CRC refuses the changed
# body; cut shorter, the end is missing.
cut_dir=$(mkcase cut "$TI.gz=cut.gz")
for k in 1 2 3 4 5 6 7 8 9; do
    head -c -$k "$tmp/bad/images_whole.gz" >"$tmp/bad/cut.gz"
    expect_error "gzip cut by $k bytes" "$cut_dir" "$TI.gz: truncated" "gzip stream ends early"
    head -c -$k "$tmp/bad/images_changed.gz" >"$tmp/bad/cut.gz"
    if [[ $k -le 4 ]]; then
        expect_error "gzip with a changed body cut by $k bytes (CRC whole)" "$cut_dir" \
            "$TI.gz: corrupt gzip data (zlib: incorrect data check)"
    else
        expect_error "gzip with a changed body cut by $k bytes" "$cut_dir" "$TI.gz: truncated" "gzip stream ends early"
    fi
done
expect_error_within 0.5 "gzip bomb: 64 MiB of zeros after the labels in their member" \
    "$(mkcase bomb "$TL.gz=labels_bomb.gz")" "$TL.gz: more than 4096 trailing bytes after the 10000 labels"
expect_error_within 0.5 "gzip bomb: 10 GiB of zeros in 160 members" \
    "$(mkcase bomb_10g "$TL.gz=labels_bomb_10g.gz")" "$TL.gz: more than 4096 trailing bytes after the 10000 labels"
expect_error "gzip followed by junk" "$(mkcase junk_gz "$TL.gz=labels_junk.gz")" \
    "$TL.gz: trailing bytes after the gzip data, from byte $(($(wc -c <"$tmp/bad/labels_junk.gz") - 4)): not another gzip member"
expect_error "gzip followed by 512 zero bytes (tar's padding)" "$(mkcase zeros_gz "$TL.gz=labels_zeros.gz")" \
    "$TL.gz: trailing bytes after the gzip data" "not another gzip member"
expect_error "gzip followed by one byte of a gzip magic" "$(mkcase one_byte_gz "$TL.gz=labels_one_byte.gz")" \
    "$TL.gz: trailing bytes after the gzip data" "not another gzip member"
expect_error "gzip followed by a gzip magic alone" "$(mkcase magic_only_gz "$TL.gz=labels_magic_only.gz")" \
    "$TL.gz: truncated: the gzip stream ends early after the 10000 labels"
expect_ok "two gzip members (concatenated, as gunzip reads them)" "$(mkcase two_members "$TL.gz=labels_two_members.gz")"
expect_ok "three gzip members: the header alone, the labels, an empty one" \
    "$(mkcase three_members "$TL.gz=labels_three_members.gz")"
expect_error "two gzip members followed by junk" "$(mkcase member_junk "$TL.gz=labels_member_junk.gz")" \
    "$TL.gz: trailing bytes after the gzip data" "not another gzip member"
expect_error "a second gzip member with bytes past the labels" \
    "$(mkcase member_trailing "$TL.gz=labels_member_trailing.gz")" "$TL.gz: 3 trailing bytes after the 10000 labels"
expect_error "missing file" "$(mkcase missing "$TL=-")" \
    "no $TL or $TL.gz in $tmp/case/missing" "run 'make data' or pass --data DIR"
expect_error "missing directory" "$tmp/nowhere" \
    "no data directory $tmp/nowhere (No such file or directory)" "run 'make data' or pass --data DIR"
expect_error "unreadable file" "$(mkcase unreadable "$TL=dir")" "$TL: read error: Is a directory"
mkfifo "$tmp/bad/fifo"
expect_error "a FIFO with no writer: refused as empty, not waited on (5 s budget)" \
    "$(mkcase fifo "$TL=fifo")" "$TL: empty file (a FIFO or pipe with no writer?)"
exit 0
