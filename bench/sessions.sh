#!/usr/bin/env bash
# Many sessions of one repository on this machine (issue 28, item 4; docs/performance.md), each
# figure against a floor measured in the same run:
#   - N (20) `yolo up --copy sI` started at once, until every one is ready, against N
#     `docker run -d` started at once (hyperfine; everything removed between runs): with N
#     spare network namespaces prepared ahead (`yolo prepare N`), and with none;
#   - one cold `yolo up` (firewall on) and one cold `yolo up --copy`, against one `docker run -d`:
#     with the one spare `up` keeps ready (made again by `yolo prepare` between runs, so a run
#     never races the previous run's top-up), and with none (`YOLO_SPARES=0`);
#   - the host memory each session adds (its guard and its agent's keep-alive), read from the
#     containers' cgroups, against a `docker run -d` container;
#   - DNS with all N sessions busy: the median latency of lookups made in every session at
#     once, against the same probe in N plain containers straight to the upstream;
#   - the exec audit with all N sessions busy: a shell loop of LOOP execs in every session at
#     once, against the same loop in N plain containers (`docker exec`) at once.
# Same requirements and clean-up as bench.sh (everything carries dev.yolo.bench=1). RUNS=5 and
# N=20 by default; prints one markdown table at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RUNS=${RUNS:-5}
N=${N:-20}
LOOP=${LOOP:-300}
DNS_QUERIES=${DNS_QUERIES:-3000}
. "$here/common.sh"

floor_rm="docker ps -aq --filter label=dev.yolo.bench.floor=1 | xargs -r docker rm -f >/dev/null"
floor_run="docker run -d --label dev.yolo.bench=1 --label dev.yolo.bench.floor=1 debian:bookworm-slim sleep 100000"
sessions_down="$YOLO down --all --remove --volumes >/dev/null 2>&1 || true"

# The bench's own upstream (as bench/dns.sh): names under bench.test, allowed.
docker build -q -t yolo-bench-tools:1 "$here/images" >/dev/null
docker network create --label dev.yolo.bench=1 yolo-bench-net >/dev/null
docker run -d --label dev.yolo.bench=1 --network yolo-bench-net --name yolo-bench-dns \
  yolo-bench-tools:1 dnsmasq -k --no-resolv --no-hosts --address=/www.bench.test/10.250.0.1 \
  --local-ttl=3600 --cache-size=10000 >/dev/null
dns_ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' yolo-bench-dns)
cat > "$YOLO_CONFIG_DIR/config.toml" <<TOML
[firewall]
docker_network = "yolo-bench-net"
allow_internal_answers = true
allow = ["*.bench.test"]
upstream_dns = "$dns_ip"
TOML
# The named sessions work on copies of a git repository.
echo 'i=0; while [ $i -lt '"$LOOP"' ]; do /bin/true; i=$((i+1)); done' > loop.sh
git init -q -b main && git add -A && git -c user.name=bench -c user.email=bench@bench commit -qm bench
"$YOLO" up >/dev/null 2>&1 # the guard image, once
"$YOLO" down --remove >/dev/null 2>&1

# N at once: N spares prepared ahead, then none (and no top-up behind).
ups="seq 1 $N | xargs -P $N -I{} $YOLO up --copy s{}"
bare_ups="seq 1 $N | xargs -P $N -I{} env YOLO_SPARES=0 $YOLO up --copy s{}"
runs="seq 1 $N | xargs -P $N -I{} $floor_run"
no_spares="$YOLO prepare --remove >/dev/null 2>&1"
mapfile -t many < <(medians -r "$RUNS" \
  --prepare "$sessions_down; $YOLO prepare $N >/dev/null 2>&1" "$ups" \
  --prepare "$sessions_down; $no_spares" "$bare_ups" \
  --prepare "$floor_rm" "$runs")
eval "$floor_rm"

# One cold, each way: with a spare ready, as `up` leaves one for the next, and with none.
mapfile -t one < <(medians -w 1 -r $((RUNS * 3)) \
  --prepare "$YOLO down --remove >/dev/null 2>&1; $YOLO prepare >/dev/null 2>&1" "$YOLO up" \
  --prepare "$YOLO down one --remove --volumes >/dev/null 2>&1; $YOLO prepare >/dev/null 2>&1" "$YOLO up --copy one" \
  --prepare "$floor_rm" "$floor_run" \
  --prepare "$YOLO down --remove >/dev/null 2>&1; $no_spares" "env YOLO_SPARES=0 $YOLO up")
eval "$sessions_down"; eval "$floor_rm"; eval "$no_spares"

# Memory: N sessions up and idle, each container's cgroup (guard and agent), against N plain
# containers. MiB from `docker stats` (cgroup usage less its inactive page cache).
# Every session in a spare's namespace, as with `yolo prepare N` ahead: its holder counted too.
"$YOLO" prepare "$N" >/dev/null 2>&1
eval "$ups" >/dev/null 2>&1
eval "$runs" >/dev/null
sleep 3
stats() { docker stats --no-stream --format '{{.Name}} {{.MemUsage}}' $(docker ps -q --filter label=dev.yolo.bench=1 "$@"); }
mib() { awk '{ v = $2; u = v; gsub(/[0-9.]/, "", u); sub(/[A-Za-z]+$/, "", v);
  f = (u == "GiB") ? 1024 : (u == "MiB") ? 1 : (u == "KiB") ? 1 / 1024 : 1 / 1048576; s += v * f; n++ }
  END { printf "%.2f", s / n }'; }
guard_mib=$(stats --filter label=dev.yolo.role=guard | mib)
agent_mib=$(stats --filter label=dev.yolo.role=agent | mib)
holder_mib=$(docker stats --no-stream --format '{{.Name}} {{.MemUsage}}' $(docker ps -q --filter label=dev.yolo.bench=1 --filter label=dev.yolo.spare --filter name=-netns) | mib)
floor_mib=$(stats --filter label=dev.yolo.bench.floor=1 | mib)

# DNS, all N busy: a probe in every session's network (the guard's, which its agent shares)
# against the same probe from N plain containers straight to the upstream.
# Each probe waits for one start time, so all N run at once (a container's start takes longer
# than the probe).
probe() {
  local net=$1 at=$2; shift 2
  docker run --rm --label dev.yolo.bench=1 --network "$net" yolo-bench-tools:1 sh -c \
    "python3 -c 'import time; time.sleep(max(0, $at - time.time()))'; python3 /usr/local/bin/dnslat.py $*"
}
# (By label alone: a guard in a spare's namespace is on the network through it.)
guards=$(docker ps -q --filter label=dev.yolo.bench=1 --filter label=dev.yolo.role=guard)
dns_median() { sed -n 's/^median_us=\([0-9]*\).*/\1/p' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
i=0
at=$(($(date +%s) + N / 2 + 5))
for g in $guards; do
  i=$((i + 1)); probe "container:$g" "$at" 127.0.0.1 www.bench.test "$DNS_QUERIES" > "$tmp/dns-guard-$i" &
done
wait
at=$(($(date +%s) + N / 2 + 5))
for i in $(seq 1 "$N"); do
  probe yolo-bench-net "$at" "$dns_ip" www.bench.test "$DNS_QUERIES" > "$tmp/dns-direct-$i" &
done
wait
dns_guard=$(dns_median "$tmp"/dns-guard-*)
dns_direct=$(dns_median "$tmp"/dns-direct-*)

# The exec audit, all N busy: the loop in every session at once, and in the N plain containers.
floors=$(docker ps -q --filter label=dev.yolo.bench.floor=1 | tr '\n' ' ')
for f in $floors; do docker cp loop.sh "$f:/loop.sh"; done
execs="seq 1 $N | xargs -P $N -I{} $YOLO exec --copy s{} sh loop.sh"
plain="echo $floors | tr ' ' '\n' | grep . | xargs -P $N -I{} docker exec {} sh /loop.sh"
mapfile -t busy < <(medians -r "$RUNS" "$execs" "$plain")

printf '\n| figure | yolo | floor (same run) | yolo / floor |\n|---|---|---|---|\n'
printf '| %s sessions `up --copy` at once, all ready, `yolo prepare %s` ahead | %s ms | %s × `docker run -d` at once: %s ms | %s |\n' \
  "$N" "$N" "${many[0]}" "$N" "${many[2]}" "$(ratio "${many[0]}" "${many[2]}")"
printf '| %s sessions `up --copy` at once, all ready, no spares | %s ms | %s × `docker run -d` at once: %s ms | %s |\n' \
  "$N" "${many[1]}" "$N" "${many[2]}" "$(ratio "${many[1]}" "${many[2]}")"
printf '| one cold `up`, firewall on, a spare ready | %s ms | `docker run -d` %s ms | %s |\n' \
  "${one[0]}" "${one[2]}" "$(ratio "${one[0]}" "${one[2]}")"
printf '| one cold `up`, firewall on, no spare | %s ms | `docker run -d` %s ms | %s |\n' \
  "${one[3]}" "${one[2]}" "$(ratio "${one[3]}" "${one[2]}")"
printf '| one cold `up --copy NAME`, a spare ready | %s ms | `docker run -d` %s ms | %s |\n' \
  "${one[1]}" "${one[2]}" "$(ratio "${one[1]}" "${one[2]}")"
printf '| memory per session, idle (guard + agent + namespace holder) | %s + %s + %s MiB | a `sleep` container %s MiB | |\n' \
  "$guard_mib" "$agent_mib" "$holder_mib" "$floor_mib"
printf '| DNS lookup with %s sessions busy, median of the sessions'"'"' medians | %s µs | straight to the upstream from %s containers: %s µs | +%s µs |\n' \
  "$N" "$dns_guard" "$N" "$dns_direct" "$((dns_guard - dns_direct))"
printf '| %s execs in each of %s sessions at once, exec audit on | %s ms | the same in %s plain containers: %s ms | %s |\n' \
  "$LOOP" "$N" "${busy[0]}" "$N" "${busy[1]}" "$(ratio "${busy[0]}" "${busy[1]}")"
