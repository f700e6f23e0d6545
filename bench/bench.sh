#!/usr/bin/env bash
# Benchmarks behind docs/performance.md. Needs a running Docker Engine, hyperfine, and a release
# build of the CLI (`cargo build --release -p yolo`, which embeds the static yolo-guard the guard
# image is made from); YOLO=/path/to/yolo picks another build. Everything it creates carries the
# label dev.yolo.bench=1 and is removed at the end (images are kept).
# Traffic stays on this machine: the "internet" is our own containers.
# SECTIONS picks what runs: "core" (everything below) and "http" (bench/http.sh, the guard's
# HTTP proxy against the same requests without inspection), both by default;
# `SECTIONS=http bash bench/bench.sh` runs the proxy's alone.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SECTIONS=${SECTIONS:-core http}
if [[ " $SECTIONS " != *" core "* ]]; then
  if [[ " $SECTIONS " == *" http "* ]]; then exec bash "$here/http.sh"; fi
  exit 0
fi
RUNS=${RUNS:-20}
. "$here/common.sh"

section() { printf '\n== %s\n' "$*"; }
# hyperfine with the medians printed (the docs quote medians).
hf() {
  local out=$tmp/hf.json
  hyperfine "$@" --export-json "$out"
  python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["results"]:
    print("median %.1f ms  %s" % (r["median"]*1000, r["command"]))' "$out"
}
median_of() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# The fake internet: a network, a DNS upstream and a TCP sink of our own.
docker build -q -t yolo-bench-tools:1 "$here/images" >/dev/null
docker network create --label dev.yolo.bench=1 yolo-bench-net >/dev/null
docker run -d --label dev.yolo.bench=1 --network yolo-bench-net --name yolo-bench-dns \
  yolo-bench-tools:1 dnsmasq -k --no-resolv --no-hosts --address=/bench.test/10.250.0.1 --local-ttl=3600 >/dev/null
docker run -d --label dev.yolo.bench=1 --network yolo-bench-net --name yolo-bench-sink \
  yolo-bench-tools:1 iperf3 -s >/dev/null
dns_ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' yolo-bench-dns)
sink_ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' yolo-bench-sink)
cat > "$YOLO_CONFIG_DIR/config.toml" <<TOML
[firewall]
docker_network = "yolo-bench-net"
allow_internal_answers = true
allow = ["*.bench.test", "$sink_ip"]
upstream_dns = "$dns_ip"
TOML

"$YOLO" up >/dev/null 2>&1   # builds the guard image on first use
id=$(docker ps -q --filter label=dev.yolo.bench=1 --filter label=dev.yolo.role=agent)
guard=$(docker ps -q --filter label=dev.yolo.bench=1 --filter label=dev.yolo.role=guard)

section "yolo up, warm (container running)"
hf -N -w 3 -r "$RUNS" "$YOLO up"

section "yolo up, cold (image present, new guard + container), against docker run -d (the floor): with a spare network namespace ready (yolo prepare), then with none"
hf -w 1 -r "$RUNS" --prepare "$YOLO down --remove >/dev/null 2>&1; $YOLO prepare >/dev/null 2>&1" "$YOLO up" \
  --prepare "$YOLO down --remove >/dev/null 2>&1; $YOLO prepare --remove >/dev/null 2>&1" "env YOLO_SPARES=0 $YOLO up" \
  --prepare "docker rm -f yolo-bench-floor >/dev/null 2>&1 || true" \
  "docker run -d --name yolo-bench-floor --label dev.yolo.bench=1 debian:bookworm-slim sleep 1000"
docker rm -f yolo-bench-floor >/dev/null 2>&1 || true

section "yolo up --network none, cold (no guard: the container alone)"
hf -w 1 -r "$RUNS" --prepare "$YOLO down --remove >/dev/null 2>&1" "$YOLO up --network none"
"$YOLO" down --remove >/dev/null 2>&1; "$YOLO" up >/dev/null 2>&1
id=$(docker ps -q --filter label=dev.yolo.bench=1 --filter label=dev.yolo.role=agent)
guard=$(docker ps -q --filter label=dev.yolo.bench=1 --filter label=dev.yolo.role=guard)

section "yolo exec true vs docker exec true"
hf -N -w 3 -r "$RUNS" "$YOLO exec true" "docker exec $id true"

section "guard start to ruleset verified (ms, from the guard's ready events)"
cat "$YOLO_DATA_DIR"/network/*.jsonl | grep '"status":"ready"' \
  | sed -E 's/.*"verify_ms":([0-9]+).*/\1/' | median_of | sed 's/^/median verify_ms: /'
cat "$YOLO_DATA_DIR"/network/*.jsonl | grep '"status":"ready"' \
  | sed -E 's/.*"ready_ms":([0-9]+).*/\1/' | median_of | sed 's/^/median ready_ms (DNS listening too): /'

# bench/dns.sh measures DNS in more detail (first lookups of new names, loss, memory).
section "DNS latency: through the guard vs straight to the same upstream"
docker run --rm --label dev.yolo.bench=1 --network "container:$guard" yolo-bench-tools:1 \
  python3 /usr/local/bin/dnslat.py 127.0.0.1 www.bench.test 3000 | sed 's/^/via guard: /'
docker run --rm --label dev.yolo.bench=1 --network yolo-bench-net yolo-bench-tools:1 \
  python3 /usr/local/bin/dnslat.py "$dns_ip" www.bench.test 3000 | sed 's/^/direct:    /'

section "DNS throughput through the guard (dnsperf, 20 s, 20 clients)"
printf 'www.bench.test A\napi.bench.test A\nx%s.bench.test A\n' 1 > "$tmp/queries"
for i in $(seq 2 200); do echo "h$i.bench.test A"; done >> "$tmp/queries"
docker run --rm --label dev.yolo.bench=1 --network "container:$guard" -v "$tmp/queries:/q:ro" yolo-bench-tools:1 \
  dnsperf -s 127.0.0.1 -d /q -l 20 -c 20 -Q 20000 2>&1 | grep -E "Queries per second|Average Latency|Queries lost"
docker run --rm --label dev.yolo.bench=1 --network yolo-bench-net -v "$tmp/queries:/q:ro" yolo-bench-tools:1 \
  dnsperf -s "$dns_ip" -d /q -l 20 -c 20 -Q 20000 2>&1 | grep -E "Queries per second|Average Latency" | sed 's/^/direct: /'

section "TCP throughput: through the firewall vs without (iperf3, 10 s)"
docker run --rm --label dev.yolo.bench=1 --network "container:$guard" yolo-bench-tools:1 \
  iperf3 -c "$sink_ip" -t 10 -J | python3 -c 'import json,sys; print("firewall: %.2f Gbit/s" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))'
docker run --rm --label dev.yolo.bench=1 --network yolo-bench-net yolo-bench-tools:1 \
  iperf3 -c "$sink_ip" -t 10 -J | python3 -c 'import json,sys; print("direct:   %.2f Gbit/s" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))'

section "guard memory"
# The guard's PID 1 is `yolo-guard run` itself, or (under Docker's init) its one child.
init_pid=$(docker inspect -f '{{.State.Pid}}' "$guard")
gpid=$init_pid
grep -q yolo-guard /proc/"$gpid"/comm || gpid=$(awk '{print $1}' /proc/"$init_pid"/task/"$init_pid"/children)
tr '\0' ' ' < /proc/"$gpid"/cmdline; echo
grep -E "VmRSS|VmHWM" /proc/"$gpid"/status

if [[ " $SECTIONS " == *" http "* ]]; then
  # Its own session, network and servers (and the same clean-up): this one's go first.
  "$YOLO" down --remove >/dev/null 2>&1 || true
  section "HTTP proxy (bench/http.sh)"
  bash "$here/http.sh"
fi
