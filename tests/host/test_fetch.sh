#!/usr/bin/env bash
# test_fetch.sh: tools/make/fetch_data.sh without the network.
#
# Every run passes --no-network, except the mirror case, whose mirrors are a
# local HTTP server (and npm is held offline should it be reached). The cases
# that need the real files take them from data/mnist (run 'make data') and are
# skipped without them. Prints one ok / not ok / skip line per case, exits 0.
set -u

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fetch=$root/tools/make/fetch_data.sh
real=$root/data/mnist
FILES=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
unset SNN_DATA_FROM SNN_DATA_MIRRORS
export npm_config_offline=true

tmp=$(mktemp -d "${TMPDIR:-/tmp}/snn-fetch-test.XXXXXX")
srv_pid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    [[ $srv_pid ]] && kill "$srv_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

ok() { echo "ok - fetch: $1"; }
not_ok() { echo "not ok - fetch: $1: ${2//$'\n'/ | }"; }
skip() { echo "skip - fetch: $1: $2"; }

# run ARGS...: fetch_data.sh with stdout and stderr together in $out, status in $rc.
run() {
    out=$("$fetch" "$@" 2>&1)
    rc=$?
}

# has TEXT...: every TEXT is in $out.
has() {
    local t
    for t in "$@"; do
        [[ $out == *"$t"* ]] || return 1
    done
}

# Four small gzip files with the right names and the wrong content.
mkdir -p "$tmp/fake"
for f in "${FILES[@]}"; do echo "not $f" | gzip >"$tmp/fake/$f.gz"; done

# ---- cases that need no data -------------------------------------------------

run --from "$tmp/fake" --dest "$tmp/d1" --no-network
if [[ $rc -ne 0 ]] && has "rejected $tmp/fake/train-images-idx3-ubyte.gz: MD5 " \
    "expected 6bbc9ace898e44ae57da46a324031adb" \
    "error: no source gave verified MNIST files (tried: directory $tmp/fake)"; then
    if [[ -e $tmp/d1 ]]; then
        not_ok "wrong MD5 rejected" "left $tmp/d1 behind"
    else
        ok "wrong MD5 rejected"
    fi
else
    not_ok "wrong MD5 rejected" "exit $rc: $out"
fi

out=$(SNN_DATA_FROM=$tmp/fake "$fetch" --dest "$tmp/d2" --no-network 2>&1)
rc=$?
if [[ $rc -ne 0 ]] && has "trying directory $tmp/fake" "rejected $tmp/fake/"; then
    ok "SNN_DATA_FROM is a source"
else
    not_ok "SNN_DATA_FROM is a source" "exit $rc: $out"
fi

run --dest "$tmp/d3" --no-network
if [[ $rc -ne 0 ]] && has "error: no source to try"; then
    ok "no source at all: one message"
else
    not_ok "no source at all: one message" "exit $rc: $out"
fi

run --from "$tmp/nowhere" --dest "$tmp/d4" --no-network
if [[ $rc -ne 0 ]] && has "$tmp/nowhere: no such directory"; then
    ok "missing --from directory"
else
    not_ok "missing --from directory" "exit $rc: $out"
fi

run --dataset cifar --dest "$tmp/d5" --no-network
if [[ $rc -ne 0 ]] && has "unknown dataset 'cifar'"; then
    ok "unknown dataset refused"
else
    not_ok "unknown dataset refused" "exit $rc: $out"
fi

# ---- cases that need the real files ------------------------------------------

have_real=1
for f in "${FILES[@]}"; do
    [[ -f $real/$f || -f $real/$f.gz ]] || have_real=
done

# A source directory with the images raw and the labels gzipped.
if [[ $have_real ]]; then
    mkdir -p "$tmp/src"
    for f in "${FILES[@]}"; do
        if [[ -f $real/$f ]]; then src=$real/$f; else src=$real/$f.gz; fi
        case $f in
        *labels*) gzip -dcf -- "$src" | gzip -1 >"$tmp/src/$f.gz" ;;
        *) ln -s "$src" "$tmp/src/${src##*/}" ;;
        esac
    done
fi

# same_as_real DIR: DIR holds the four files raw, equal to the real ones, and no stage left.
same_as_real() {
    local f ref
    for f in "${FILES[@]}"; do
        [[ -f $1/$f ]] || { echo "no $1/$f"; return 1; }
        ref=$real/$f
        [[ -f $ref ]] || ref=$real/$f.gz
        gzip -dcf -- "$ref" | cmp -s - "$1/$f" ||
            { echo "$1/$f differs from $real/$f"; return 1; }
    done
    if compgen -G "$1/.fetch.*" >/dev/null; then
        echo "stage left in $1"
        return 1
    fi
}

# expect_fetched_from SRC DEST: the last run succeeded from directory SRC and left the real files in DEST.
expect_fetched_from() {
    local why=
    if [[ $rc -eq 0 ]] && has "source: directory $1" && why=$(same_as_real "$2"); then
        ok "$name"
    else
        not_ok "$name" "exit $rc: ${why:-}: $out"
    fi
}

name="local directory (raw and gzip)"
if [[ ! $have_real ]]; then
    skip "$name" "no $real (run 'make data')"
else
    run --from "$tmp/src" --dest "$tmp/dest" --no-network
    expect_fetched_from "$tmp/src" "$tmp/dest"
fi

name="already present: nothing fetched"
if [[ ! -f $tmp/dest/${FILES[0]} ]]; then
    skip "$name" "no verified files to start from"
else
    before=$(ls -li --time-style=full-iso "$tmp/dest")
    run --from "$tmp/fake" --dest "$tmp/dest" --no-network
    if [[ $rc -eq 0 ]] && has "already holds the verified MNIST files" && ! has "trying" &&
        [[ $(ls -li --time-style=full-iso "$tmp/dest") == "$before" ]]; then
        ok "$name"
    else
        not_ok "$name" "exit $rc: $out"
    fi
fi

name="a wrong file in dest is fetched again"
if [[ ! -f $tmp/dest/${FILES[0]} ]]; then
    skip "$name" "no verified files to start from"
else
    printf 'x' >>"$tmp/dest/t10k-labels-idx1-ubyte"
    run --from "$tmp/src" --dest "$tmp/dest" --no-network
    expect_fetched_from "$tmp/src" "$tmp/dest"
fi

# Mirrors: a local server with a wrong file under bad/, nothing under none/,
# the real .gz files under good/.
name="mirrors: wrong MD5 and 404 fall through to a good one"
python=$(command -v python3 || command -v /usr/bin/python3)
if [[ ! $have_real ]]; then
    skip "$name" "no $real (run 'make data')"
elif [[ ! $python ]] || { ! command -v curl && ! command -v wget; } >/dev/null; then
    skip "$name" "needs python3 and curl or wget"
else
    mkdir -p "$tmp/srv/bad" "$tmp/srv/good"
    cp "$tmp/fake/"* "$tmp/srv/bad/"
    for f in "${FILES[@]}"; do
        if [[ -f $tmp/src/$f.gz ]]; then cp "$tmp/src/$f.gz" "$tmp/srv/good/"; else gzip -1 -c -- "$tmp/src/$f" >"$tmp/srv/good/$f.gz"; fi
    done
    "$python" - "$tmp/srv" >"$tmp/port" 2>/dev/null <<'EOF' &
import functools, http.server, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
server = http.server.HTTPServer(("127.0.0.1", 0), handler)
print(server.server_address[1], flush=True)
server.serve_forever()
EOF
    srv_pid=$!
    for _ in $(seq 50); do
        [[ -s $tmp/port ]] && break
        sleep 0.1
    done
    port=$(cat "$tmp/port")
    if [[ ! $port ]]; then
        not_ok "$name" "the local HTTP server did not start"
    else
        base=http://127.0.0.1:$port
        out=$(SNN_DATA_MIRRORS="$base/bad/ $base/none/ $base/good/" "$fetch" --dest "$tmp/mdest" 2>&1)
        rc=$?
        if [[ $rc -eq 0 ]] && has "rejected $base/bad/train-images-idx3-ubyte.gz: MD5" \
            "$base/none/train-images-idx3-ubyte.gz: " "source: $base/good/" &&
            why=$(same_as_real "$tmp/mdest"); then
            ok "$name"
        else
            not_ok "$name" "exit $rc: ${why:-}: $out"
        fi
    fi
fi

name="Fashion-MNIST from the installed Debian package"
if [[ ! -d /usr/share/datasets/fashion-mnist ]]; then
    skip "$name" "dataset-fashion-mnist is not installed"
else
    run --dataset fashion-mnist --dest "$tmp/fashion" --no-network
    if [[ $rc -eq 0 ]] && has "Fashion-MNIST: 4 files verified" "installed Debian package"; then
        ok "$name"
    else
        not_ok "$name" "exit $rc: $out"
    fi
fi

name="another dataset's files are not overwritten"
if [[ ! $have_real ]]; then
    skip "$name" "no $real (run 'make data')"
else
    mkdir -p "$tmp/theirs"
    cp "$real"/t10k-labels-idx1-ubyte* "$tmp/theirs/"
    before=$(md5sum "$tmp"/theirs/* | md5sum)
    run --dataset fashion-mnist --dest "$tmp/theirs" --no-network
    if [[ $rc -ne 0 ]] && has "holds the files of another dataset, mnist" "refusing to overwrite them" &&
        [[ $(md5sum "$tmp"/theirs/* | md5sum) == "$before" && $(ls "$tmp/theirs" | wc -l) -eq 1 ]]; then
        ok "$name"
    else
        not_ok "$name" "exit $rc: $out"
    fi
fi
exit 0
