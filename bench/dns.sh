#!/usr/bin/env bash
# The DNS part of bench/bench.sh on its own, with what issue 10 asks of it, as ratios against
# the direct-to-upstream floor measured in the same run: latency of names whose addresses are
# already open, latency of the first lookup of new names (each a new address: a set update),
# dnsperf throughput and loss, and the guard's memory after the load.
# Same requirements and clean-up as bench.sh; N=queries per latency probe (default 3000).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
N=${N:-3000}
. "$here/common.sh"
section() { printf '\n== %s\n' "$*"; }

docker build -q -t yolo-bench-tools:1 "$here/images" >/dev/null
# New names, each with its own address, for the first-lookup probe.
for i in $(seq 1 "$N"); do echo "10.251.$((i / 250)).$((i % 250 + 1)) n$i.new.bench.test"; done > "$tmp/hosts"
docker network create --label dev.yolo.bench=1 yolo-bench-net >/dev/null
docker run -d --label dev.yolo.bench=1 --network yolo-bench-net --name yolo-bench-dns -v "$tmp/hosts:/hosts:ro" \
  yolo-bench-tools:1 dnsmasq -k --no-resolv --no-hosts --addn-hosts=/hosts \
  --address=/www.bench.test/10.250.0.1 --address=/api.bench.test/10.250.0.1 --address=/h.bench.test/10.250.0.1 \
  --local-ttl=3600 --cache-size=10000 >/dev/null
dns_ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' yolo-bench-dns)
cat > "$YOLO_CONFIG_DIR/config.toml" <<TOML
[firewall]
docker_network = "yolo-bench-net"
allow_internal_answers = true
allow = ["*.bench.test"]
upstream_dns = "$dns_ip"
TOML
"$YOLO" up >/dev/null 2>&1
guard=$(docker ps -q --filter label=dev.yolo.bench=1 --filter label=dev.yolo.role=guard --filter network=yolo-bench-net | head -1)
tools() { docker run --rm --label dev.yolo.bench=1 "$@"; }

section "DNS latency, one query at a time ($N queries): open name via guard, new names via guard, direct"
tools --network "container:$guard" yolo-bench-tools:1 python3 /usr/local/bin/dnslat.py 127.0.0.1 www.bench.test "$N" | sed 's/^/open name via guard: /'
tools --network "container:$guard" yolo-bench-tools:1 python3 /usr/local/bin/dnslat.py 127.0.0.1 'n{i}.new.bench.test' "$N" | sed 's/^/new names via guard: /'
tools --network yolo-bench-net yolo-bench-tools:1 python3 /usr/local/bin/dnslat.py "$dns_ip" www.bench.test "$N" | sed 's/^/direct:              /'
tools --network yolo-bench-net yolo-bench-tools:1 python3 /usr/local/bin/dnslat.py "$dns_ip" 'n{i}.new.bench.test' "$N" | sed 's/^/direct, new names:   /'

section "DNS throughput (dnsperf, 20 s, 20 clients, capped at ${QPS:=30000} q/s)"
{ echo "www.bench.test A"; echo "api.bench.test A"; for i in $(seq 1 200); do echo "n$i.new.bench.test A"; done; } > "$tmp/queries"
tools --network "container:$guard" -v "$tmp/queries:/q:ro" yolo-bench-tools:1 \
  dnsperf -s 127.0.0.1 -d /q -l 20 -c 20 -Q "$QPS" 2>&1 | grep -E "Queries (per second|lost)|Average Latency" | sed 's/^/via guard: /'
tools --network yolo-bench-net -v "$tmp/queries:/q:ro" yolo-bench-tools:1 \
  dnsperf -s "$dns_ip" -d /q -l 20 -c 20 -Q "$QPS" 2>&1 | grep -E "Queries (per second|lost)|Average Latency" | sed 's/^/direct:    /'

section "guard memory after the load"
init_pid=$(docker inspect -f '{{.State.Pid}}' "$guard")
# The guard's PID 1 is `yolo-guard run` itself, or (under Docker's init) its one child.
gpid=$init_pid
grep -q yolo-guard /proc/"$gpid"/comm || gpid=$(awk '{print $1}' /proc/"$init_pid"/task/"$init_pid"/children)
tr '\0' ' ' < /proc/"$gpid"/cmdline; echo
grep -E "VmRSS|VmHWM" /proc/"$gpid"/status
