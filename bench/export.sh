#!/usr/bin/env bash
# The audit export's cost to the agent (docs/performance.md): 1,000 fork+exec of a small static
# program through `yolo exec` (each recorded by the guard), in two sessions at once: one with no
# export (the floor) and one whose `[audit] otlp_endpoint` is a collector that takes connections
# and never answers (its shipper's queue fills, its batches time out). Alternating (which goes
# first alternates too), ROUNDS times;
# prints each round's median per exec and the ratio of the medians. Then checks that the
# exporting session's log holds every exec and that its export.json counts what was lost.
# Needs gcc with a static libc on the host (Debian: gcc, libc6-dev) besides what bench.sh needs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-7}
N=${N:-1000}
. "$here/common.sh"
gcc -O2 -static -o "$tmp/ws/forkexec" "$here/exec/forkexec.c"
gcc -O2 -static -o "$tmp/ws/tiny" "$here/exec/tiny.c"
# The second workspace (same programs), with its own user config that exports.
mkdir -p "$tmp/ws2/.devcontainer" "$tmp/config2"
cp "$tmp/ws/.devcontainer/devcontainer.json" "$tmp/ws2/.devcontainer/"
cp "$tmp/ws/forkexec" "$tmp/ws/tiny" "$tmp/ws2/"
# A collector that hangs: accepts, reads, never answers.
port_file=$tmp/port
python3 - "$port_file" <<'PY' &
import socket, sys, threading
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
held = []
def drain(c):
    while c.recv(65536): pass
while True:
    c, _ = s.accept(); held.append(c)
    threading.Thread(target=drain, args=(c,), daemon=True).start()
PY
collector=$!
trap 'kill $collector 2>/dev/null; cleanup' EXIT
for _ in $(seq 50); do [ -s "$port_file" ] && break; sleep 0.1; done
printf '[audit]\notlp_endpoint = "http://127.0.0.1:%s"\n' "$(cat "$port_file")" > "$tmp/config2/config.toml"

"$YOLO" up >/dev/null 2>&1
(cd "$tmp/ws2" && YOLO_CONFIG_DIR=$tmp/config2 "$YOLO" up >/dev/null 2>&1)
pgrep -f "audit ship" >/dev/null || { echo "no shipper running" >&2; exit 1; }
without=() with=()
plain() { read -r m _ < <("$YOLO" exec -- ./forkexec "$N" ./tiny 2>/dev/null); without+=("$m"); }
exporting() { read -r m _ < <(cd "$tmp/ws2" && YOLO_CONFIG_DIR=$tmp/config2 "$YOLO" exec -- ./forkexec "$N" ./tiny 2>/dev/null); with+=("$m"); }
for r in $(seq "$ROUNDS"); do
  # Which goes first alternates: the second of a pair runs on warmer caches.
  if (( r % 2 )); then plain; exporting; else exporting; plain; fi
  printf 'round %d: no export %s us, hanging collector %s us per fork+exec (median of %d)\n' "$r" "${without[-1]}" "${with[-1]}" "$N"
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
w0=$(med "${without[@]}"); w1=$(med "${with[@]}")
awk -v a="$w0" -v b="$w1" 'BEGIN { printf "median of rounds: no export %.1f us, hanging collector %.1f us per exec: ratio %.3f\n", a, b, b / a }'
(cd "$tmp/ws2" && YOLO_CONFIG_DIR=$tmp/config2 "$YOLO" down >/dev/null 2>&1)
session=$(cd "$tmp/ws2" && YOLO_CONFIG_DIR=$tmp/config2 "$YOLO" audit --list | awk 'NR==1 {print $1}')
for _ in $(seq 120); do grep -q '"done": true' "$YOLO_DATA_DIR/sessions/$session/export.json" 2>/dev/null && break; sleep 0.5; done
recorded=$(grep '"kind":"exec"' "$YOLO_DATA_DIR/network/$session.exec.jsonl" | grep -c '"argv":\["./tiny"\]' || true)
echo "exec records of tiny in the exporting session: $recorded (expected $((ROUNDS * N)))"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["otlp"]; print("export: sent %d, dropped %d, failed %d" % (s["sent"], s["dropped"], s["failed"]))' "$YOLO_DATA_DIR/sessions/$session/export.json"
[ "$recorded" -eq $((ROUNDS * N)) ]
