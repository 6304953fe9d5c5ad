#!/usr/bin/env bash
# tools/setup.sh against a stand-in apt-get that behaves as Debian's does
# while another apt holds dpkg's lock: it fails at once (exit 100) unless
# told to wait (-o DPkg::Lock::Timeout=N), and records how it was called.
# With only the stand-ins on PATH, setup.sh finds the commands missing and
# calls apt-get. Prints one ok / not ok line, exits 0.
set -u
cd "$(dirname "$0")/../.."
T=$(mktemp -d "${TMPDIR:-/tmp}/snn-setup.XXXXXX")
trap 'rm -rf "$T"' EXIT
mkdir "$T/bin"
cat >"$T/bin/apt-get" <<'STUB'
#!/bin/bash
echo "apt-get $*" >>"$SNN_APT_CALLS"
[[ " $* " == *" DPkg::Lock::Timeout="* ]] && exit 0
echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt)" >&2
exit 100
STUB
printf '#!/bin/bash\necho 0\n' >"$T/bin/id"
chmod +x "$T/bin/apt-get" "$T/bin/id"
out=$(SNN_APT_CALLS=$T/calls PATH=$T/bin /bin/bash tools/setup.sh 2>&1); rc=$?
calls=$(cat "$T/calls" 2>/dev/null)
if [ $rc -eq 0 ] && [ "$(grep -c 'DPkg::Lock::Timeout=' <<<"$calls")" -eq 2 ] && grep -q "setup: ready" <<<"$out"; then
    echo "ok - setup.sh waits for dpkg's lock held by another apt (update and install)"
else
    echo "not ok - setup.sh with dpkg's lock held: status $rc: $(tail -n 2 <<<"$out" | tr '\n' ' ') calls: $(tr '\n' ';' <<<"$calls")"
fi
