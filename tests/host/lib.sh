# Helpers of the host test scripts that judge the program's own outputs
# (source it after cd to the repository root).

# verdict NAME CONDITION [WHY]: ok when the shell condition holds
verdict() { if eval "$2"; then echo "ok - $1"; else echo "not ok - $1${3:+: $3}"; fi; }

# expect_refusal NAME FRAGMENT CMD...: CMD exits 1 with one error line holding FRAGMENT
expect_refusal() {
    local name=$1 want=$2 out rc; shift 2
    out=$("$@" 2>&1); rc=$?
    if [ $rc -ne 1 ]; then echo "not ok - $name: exit $rc, want 1: $(tail -n 2 <<<"$out" | tr '\n' ' ')"
    elif ! grep -qF -- "$want" <<<"$out"; then echo "not ok - $name: message lacks '$want': $(grep error: <<<"$out")"
    elif [ "$(grep -c 'error:' <<<"$out")" -ne 1 ]; then echo "not ok - $name: more than one error line"
    else echo "ok - $name: $(grep -o 'error: .*' <<<"$out" | cut -c 8-90)..."; fi
}

# meta FILE KEY: a metadata value of a safetensors file
meta() { python3 -c 'import json, struct, sys; b = open(sys.argv[1], "rb").read(8 << 20)
print(json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"][sys.argv[2]])' "$1" "$2"; }
