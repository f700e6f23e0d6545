# Sourced by the bench scripts: hyperfine (from Debian when missing), the yolo build to measure
# (YOLO=..., default target/release/yolo), a throwaway workspace with its own yolo config and
# data folders, the cleanup of everything labelled dev.yolo.bench=1 at exit, and `medians`/`ratio`
# for hyperfine results.
command -v hyperfine >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q hyperfine >/dev/null
YOLO=${YOLO:-$here/../target/release/yolo}
[ -x "$YOLO" ] || { echo "no yolo at $YOLO: run \`cargo build --release -p yolo\` or set YOLO" >&2; exit 1; }
export YOLO_LABELS=dev.yolo.bench=1 NO_COLOR=1
tmp=$(mktemp -d)
export YOLO_DATA_DIR=$tmp/data YOLO_CONFIG_DIR=$tmp/config
mkdir -p "$tmp/ws/.devcontainer" "$YOLO_CONFIG_DIR"
echo '{"image": "debian:bookworm-slim"}' > "$tmp/ws/.devcontainer/devcontainer.json"
cleanup() {
  # A spare a background top-up (`yolo prepare --after`) is still making would outlive the rest.
  for _ in $(seq 1 100); do pgrep -f "$YOLO prepare --after" >/dev/null || break; sleep 0.1; done
  docker ps -aq --filter label=dev.yolo.bench=1 | xargs -r docker rm -f >/dev/null
  docker volume ls -q --filter label=dev.yolo.bench=1 | xargs -r docker volume rm >/dev/null
  docker network ls -q --filter label=dev.yolo.bench=1 | xargs -r docker network rm >/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp/ws"

# hyperfine's medians in ms, one line per command, in the order given.
medians() {
  local out=$tmp/hf.json
  hyperfine "$@" --export-json "$out" >/dev/null
  python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["results"]:
    print("%.1f" % (r["median"]*1000))' "$out"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f×", a / b }'; }
