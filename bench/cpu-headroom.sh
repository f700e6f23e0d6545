#!/usr/bin/env bash
# How usable the host stays while the agent burns every CPU it is given (docs/performance.md,
# "CPU headroom"). Floor: a small CPU-bound host command with the container idle. Then the same
# command while four busy loops run in the container, once with yolo's default CPU limit (which
# leaves the engine's host a core) and once with the old default of 2 CPUs (`--cpus 2`, all the
# cores of a 2-core machine). Reported as ratios to the floor, measured in the same run.
# Needs a running Docker Engine, hyperfine and a yolo build (YOLO=..., default target/release).
# Everything it creates carries the label dev.yolo.bench=1 and is removed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RUNS=${RUNS:-30}
. "$here/common.sh"

# A host task of a few tens of milliseconds of pure CPU.
task="sh -c 'i=0; while [ \$i -lt 30000 ]; do i=\$((i+1)); done'"
median() {
  hyperfine -N -w 3 -r "$RUNS" "$task" --export-json "$tmp/hf.json" >/dev/null 2>&1
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["median"]*1000)' "$tmp/hf.json"
}
burn() {  # four busy loops in the container, in the background, until the container stops
  "$YOLO" exec -- sh -c 'for i in 1 2 3 4; do (while :; do :; done) & done; wait' >/dev/null 2>&1 &
  sleep 2
}

"$YOLO" up --network none >/dev/null 2>&1
cpus=$(docker inspect -f '{{.HostConfig.NanoCpus}}' "$(docker ps -q --filter label=dev.yolo.bench=1)")
floor=$(median)
burn
default=$(median)
"$YOLO" down --remove >/dev/null 2>&1
"$YOLO" up --network none --cpus 2 >/dev/null 2>&1
burn
two=$(median)
"$YOLO" down --remove >/dev/null 2>&1
python3 - "$floor" "$default" "$two" "$cpus" "$(nproc)" <<'PY'
import sys
floor, default, two, nano, cores = map(float, sys.argv[1:])
print(f"host cores {cores:.0f}; yolo's default gives the container {nano/1e9:g} CPUs")
print(f"floor (container idle)          {floor:7.1f} ms  1.00x")
print(f"4 busy loops, yolo's default    {default:7.1f} ms  {default/floor:.2f}x")
print(f"4 busy loops, --cpus 2          {two:7.1f} ms  {two/floor:.2f}x")
PY
