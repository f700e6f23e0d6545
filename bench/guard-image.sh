#!/usr/bin/env bash
# The guard image's preparation on a machine without it (docs/performance.md, "Preparing the
# guard image"): `docker build --no-cache` of the context the CLI sends (templates/guard/Dockerfile
# and the static yolo-guard the release CLI embeds), RUNS times; prints the median. Needs a
# release build (`cargo build --release -p yolo`) or GUARD_BIN=/path/to/static/yolo-guard.
# The images carry the label dev.yolo.bench=1 and are removed at the end. No network is used.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
RUNS=${RUNS:-5}
bin=${GUARD_BIN:-$(ls -t "$root"/target/release/build/yolo-*/out/guard.bin 2>/dev/null | head -1)}
[ -n "$bin" ] && [ -s "$bin" ] || { echo "no guard binary: build the CLI in release or set GUARD_BIN" >&2; exit 1; }
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"; docker image ls -q --filter label=dev.yolo.bench=1 --filter reference=yolo-bench-guard | xargs -r docker image rm -f >/dev/null' EXIT
cp "$root/templates/guard/Dockerfile" "$ctx/Dockerfile"
cp "$bin" "$ctx/yolo-guard"
for _ in $(seq "$RUNS"); do
  start=$(date +%s.%N)
  docker build -q --no-cache --label dev.yolo.bench=1 -t yolo-bench-guard:1 "$ctx" >/dev/null 2>&1
  end=$(date +%s.%N)
  echo "$start $end" | awk '{printf "%.0f\n", ($2-$1)*1000}'
done | sort -n | awk '{a[NR]=$1} END {printf "guard image build: median %d ms over %d runs\n", a[int((NR+1)/2)], NR}'
docker image ls --format '{{.Size}}' yolo-bench-guard:1 | sed 's/^/guard image size: /'
