#!/usr/bin/env bash
# The issue "Speed" table, in one run (docs/performance.md): yolo against its floors (`docker run
# -d`, `docker exec`, the same shell loop with `--network none`) and, when it is installed,
# the reference devcontainer CLI (npm @devcontainers/cli: REF=/path/to/devcontainer, or
# target/devcontainers-cli/node_modules/.bin/devcontainer as scripts/compat.py installs it) on
# the same config `{"image": "debian:bookworm-slim"}`. Ratios are computed against the floor
# measured in the same hyperfine call; the machine's load changes absolute times, not them.
# Prints one markdown table at the end. Everything carries dev.yolo.bench=1 and is removed
# (the reference CLI's container too: it is given that label with --id-label).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RUNS=${RUNS:-15}
. "$here/common.sh"
REF=${REF:-$here/../target/devcontainers-cli/node_modules/.bin/devcontainer}
[ -x "$REF" ] || REF=


"$YOLO" up >/dev/null 2>&1 # the guard image, once
"$YOLO" down --remove >/dev/null 2>&1

# Cold up: yolo (firewall on) | reference CLI (no firewall) | docker run -d.
ref_rm="docker ps -aq --filter label=dev.yolo.bench.ref=1 | xargs -r docker rm -f >/dev/null"
ref_up=("$REF" up --workspace-folder "$tmp/ws" --id-label dev.yolo.bench=1 --id-label dev.yolo.bench.ref=1)
cmds=(--prepare "$YOLO down --remove >/dev/null 2>&1" "$YOLO up")
[ -n "$REF" ] && cmds+=(--prepare "$ref_rm" "${ref_up[*]}")
cmds+=(--prepare "docker rm -f yolo-bench-floor >/dev/null 2>&1 || true"
  "docker run -d --name yolo-bench-floor --label dev.yolo.bench=1 debian:bookworm-slim sleep 1000")
mapfile -t cold < <(medians -w 1 -r "$RUNS" "${cmds[@]}")
docker rm -f yolo-bench-floor >/dev/null 2>&1 || true
if [ -n "$REF" ]; then cold_ref=${cold[1]}; cold_floor=${cold[2]}; else cold_ref=—; cold_floor=${cold[1]}; fi

# Warm up and `exec true`: both running.
"$YOLO" up >/dev/null 2>&1
[ -n "$REF" ] && "${ref_up[@]}" >/dev/null 2>&1
id=$(docker ps -q --filter label=dev.yolo.bench=1 --filter label=dev.yolo.role=agent)
cmds=("$YOLO up" "$YOLO exec true" "docker exec $id true")
[ -n "$REF" ] && cmds+=("${ref_up[*]}" "$REF exec --workspace-folder $tmp/ws --id-label dev.yolo.bench=1 --id-label dev.yolo.bench.ref=1 true")
mapfile -t warm < <(medians -N -w 3 -r $((RUNS * 2)) "${cmds[@]}")

# 1,000 execs in a shell loop: with the exec audit, and in a `--network none` container (no
# guard, no audit), the same image and loop.
echo 'i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done' > "$tmp/ws/loop.sh"
mkdir -p "$tmp/none/.devcontainer"
cp "$tmp/ws/.devcontainer/devcontainer.json" "$tmp/none/.devcontainer/"
cp "$tmp/ws/loop.sh" "$tmp/none/"
(cd "$tmp/none" && "$YOLO" up --network none >/dev/null 2>&1)
mapfile -t loop < <(medians -N -w 1 -r "$RUNS" "$YOLO exec sh loop.sh" \
  "$YOLO exec --workspace $tmp/none sh loop.sh")

# The CLI's peak memory: a cold and a warm up, an exec.
peak() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
"$YOLO" down --remove >/dev/null 2>&1
mem_cold=$(peak "$YOLO" up)
mem_warm=$(peak "$YOLO" up)
mem_exec=$(peak "$YOLO" exec true)
mem_max=$(printf '%s\n' "$mem_cold" "$mem_warm" "$mem_exec" | sort -n | tail -1)

printf '\n| figure | yolo | reference devcontainer CLI | floor | yolo / floor |\n|---|---|---|---|---|\n'
printf '| cold `up`, firewall on | %s ms | %s | `docker run -d` %s ms | %s |\n' \
  "${cold[0]}" "${cold_ref}${REF:+ ms (no firewall)}" "$cold_floor" "$(ratio "${cold[0]}" "$cold_floor")"
printf '| warm `up` | %s ms | %s | | |\n' "${warm[0]}" "${warm[3]:-—}${REF:+ ms}"
printf '| `exec true` | %s ms | %s | `docker exec` %s ms | %s |\n' \
  "${warm[1]}" "${warm[4]:-—}${REF:+ ms}" "${warm[2]}" "$(ratio "${warm[1]}" "${warm[2]}")"
printf '| 1,000 execs in a shell loop, exec audit on | %s ms | — | `--network none` %s ms | %s |\n' \
  "${loop[0]}" "${loop[1]}" "$(ratio "${loop[0]}" "${loop[1]}")"
printf '| CLI peak resident (cold up / warm up / exec) | %s / %s / %s KiB (max %.1f MiB) | | | |\n' \
  "$mem_cold" "$mem_warm" "$mem_exec" "$(awk -v k="$mem_max" 'BEGIN { print k / 1024 }')"
