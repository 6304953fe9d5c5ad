#!/usr/bin/env bash
# menuconfig as a user drives it, in a real terminal (tmux): jump to the hidden
# width, type a new value, save on quit, then check .config and the header.
set -u
cd "$(dirname "$0")/../.."
if ! command -v tmux >/dev/null; then echo "skip - menuconfig: skipped: tmux not installed"; exit 0; fi
T=$(mktemp -d "${TMPDIR:-/tmp}/snn-menu.XXXXXX")
S=snn-menuconfig-$$
trap 'tmux kill-session -t $S 2>/dev/null; rm -rf "$T"' EXIT
make --no-print-directory O="$T" host_defconfig >/dev/null

screen_has() { # wait up to 10 s for TEXT on the screen
    for _ in $(seq 100); do
        tmux capture-pane -p -t "$S" 2>/dev/null | grep -qF -- "$1" && return 0
        sleep 0.1
    done
    return 1
}

tmux new-session -d -s "$S" -x 100 -y 30 "make --no-print-directory O='$T' menuconfig; echo MENUCONFIG-EXIT=\$?; sleep 30"
if ! screen_has "Hidden layer width" && ! screen_has "Model"; then
    echo "not ok - menuconfig: the main menu did not appear"; tmux capture-pane -p -t "$S" | sed 's/^/    /'; exit 0
fi
echo "ok - menuconfig opens its main menu in a terminal"
tmux send-keys -t "$S" / ; screen_has "Jump to" || true
tmux send-keys -t "$S" -l NN_HIDDEN_WIDTH; sleep 0.3
tmux send-keys -t "$S" Enter; sleep 0.3
tmux send-keys -t "$S" Enter; screen_has "Hidden layer width" || true; sleep 0.3
tmux send-keys -t "$S" C-e C-u; tmux send-keys -t "$S" -l 123; tmux send-keys -t "$S" Enter; sleep 0.3
tmux send-keys -t "$S" q; screen_has "Save configuration?" || true
tmux send-keys -t "$S" y
if ! screen_has "MENUCONFIG-EXIT=0"; then
    echo "not ok - menuconfig did not save and exit"; tmux capture-pane -p -t "$S" | sed 's/^/    /'; exit 0
fi
if grep -q '^CONFIG_NN_HIDDEN_WIDTH=123$' "$T/.config"; then
    echo "ok - menuconfig saves the value typed (CONFIG_NN_HIDDEN_WIDTH=123)"
else echo "not ok - .config does not hold the value typed: $(grep HIDDEN_WIDTH "$T/.config")"; fi
make --no-print-directory O="$T" "$T/include/generated/config.h" >/dev/null 2>&1
if grep -q '^#define CONFIG_NN_HIDDEN_WIDTH 123$' "$T/include/generated/config.h"; then
    echo "ok - the generated header follows menuconfig's change"
else echo "not ok - include/generated/config.h does not hold the new width"; fi
