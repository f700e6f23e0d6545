#!/usr/bin/env bash
# The exec audit's cost (docs/performance.md): 1,000 fork+exec of a small static program, with
# the audit (through `yolo exec`, so the shim's filter is on and the guard records every exec)
# and without it, in the same container (a plain `docker exec`, which skips the shim: the
# guard records that process as unsupervised and nothing else), alternating, ROUNDS times.
# Prints each round's median per exec and the added time. Also checks that none was lost: the
# exec log must hold one record per exec of the audited rounds.
# Needs gcc with a static libc on the host (Debian: gcc, libc6-dev) besides what bench.sh needs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-5}
N=${N:-1000}
. "$here/common.sh"
gcc -O2 -static -o "$tmp/ws/forkexec" "$here/exec/forkexec.c"
gcc -O2 -static -o "$tmp/ws/tiny" "$here/exec/tiny.c"
"$YOLO" up >/dev/null 2>&1
id=$(docker ps -q --filter label=dev.yolo.bench=1 --filter label=dev.yolo.role=agent)
ws=$(docker inspect -f '{{range .Mounts}}{{if eq .Source "'"$tmp/ws"'"}}{{.Destination}}{{end}}{{end}}' "$id")
guard=$(docker ps -q --filter label=dev.yolo.bench=1 --filter label=dev.yolo.role=guard)
guard_pid=$(docker inspect -f '{{.State.Pid}}' "$guard")
# The guard's CPU time (all its threads), in clock ticks.
guard_ticks() { awk '{print $14 + $15}' "/proc/$guard_pid/stat"; }
ticks=0
without=() with=()
for r in $(seq "$ROUNDS"); do
  read -r m _ < <(docker exec "$id" "$ws/forkexec" "$N" "$ws/tiny")
  without+=("$m")
  t0=$(guard_ticks)
  read -r m _ < <("$YOLO" exec -- "$ws/forkexec" "$N" "$ws/tiny" 2>/dev/null)
  ticks=$((ticks + $(guard_ticks) - t0))
  with+=("$m")
  printf 'round %d: without %s us, with %s us per fork+exec (median of %d)\n' "$r" "${without[-1]}" "${with[-1]}" "$N"
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
w0=$(med "${without[@]}"); w1=$(med "${with[@]}")
awk -v a="$w0" -v b="$w1" 'BEGIN { printf "median of rounds: without %.1f us, with %.1f us: +%.1f us per exec, ratio %.2f\n", a, b, b - a, b / a }'
awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" -v n=$((ROUNDS * N)) 'BEGIN { printf "guard CPU per audited exec: %.0f us\n", t / hz * 1e6 / n }'
sleep 1
log=$(ls "$YOLO_DATA_DIR"/network/*.exec.jsonl)
recorded=$(grep '"kind":"exec"' "$log" | grep -c '"argv":\["'"$ws"'/tiny"\]' || true)
echo "exec records of tiny: $recorded (expected $((ROUNDS * N)))"
[ "$recorded" -eq $((ROUNDS * N)) ]
