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

# Host work of a few tens of milliseconds of pure CPU: one job, and one per host core (a host
# build), each measured by hyperfine; the medians in ms.
job='i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done'
one="sh -c '$job'"
all="sh -c 'for j in \$(seq $(nproc)); do ($job) & done; wait'"
medians() {
  hyperfine -N -w 3 -r "$RUNS" "$one" "$all" --export-json "$tmp/hf.json" >/dev/null 2>&1
  python3 -c 'import json,sys; print(" ".join(str(r["median"]*1000) for r in json.load(open(sys.argv[1]))["results"]))' "$tmp/hf.json"
}
burn() {  # four busy loops in the container, in the background, until the container stops
  "$YOLO" exec -- sh -c 'for i in 1 2 3 4; do (while :; do :; done) & done; wait' >/dev/null 2>&1 &
  sleep 2
}

"$YOLO" up --network none >/dev/null 2>&1
cpus=$(docker inspect -f '{{.HostConfig.NanoCpus}}' "$(docker ps -q --filter label=dev.yolo.bench=1)")
floor=$(medians)
burn
default=$(medians)
"$YOLO" down --remove >/dev/null 2>&1
"$YOLO" up --network none --cpus 2 >/dev/null 2>&1
burn
two=$(medians)
"$YOLO" down --remove >/dev/null 2>&1
python3 - "$cpus" "$(nproc)" $floor $default $two <<'PY'
import sys
nano, cores, f1, fa, d1, da, t1, ta = map(float, sys.argv[1:])
print(f"host cores {cores:.0f}; yolo's default gives the container {nano/1e9:g} CPUs")
print(f"{'':34}{'one job':>18}{'one job per core':>24}")
for name, a, b in [("floor (container idle)", f1, fa), ("4 busy loops, yolo's default", d1, da), ("4 busy loops, --cpus 2", t1, ta)]:
    print(f"{name:34}{a:9.1f} ms {a/f1:5.2f}x{b:13.1f} ms {b/fa:5.2f}x")
PY
