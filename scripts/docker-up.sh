#!/usr/bin/env bash
# The Docker Engine the tests need, on a bare Debian machine: yolo's own copy, so a clone of the
# repository alone can run its tests (.ci/run calls it; README says when to).
#
# Idempotent. Safe to call from .ci/run and from a development shell.
#   1. installs docker.io (Debian package) when no `dockerd` is on PATH;
#   2. starts containerd + dockerd in the background when the socket does not answer;
#   3. makes sure `debian:bookworm-slim` exists locally: pulls it when a registry answers,
#      otherwise builds it with debootstrap from Debian's package mirror and tags it;
#   4. installs the companions tests use: docker-compose (Compose configs) and docker-registry
#      (a real OCI registry for Features; the harness starts it on 127.0.0.1 itself).
# Prints one line per step; exits non-zero with a reason when a step fails.
set -euo pipefail

SOCK=/var/run/docker.sock
LOGDIR=${DOCKER_UP_LOGDIR:-/tmp/docker-up}
BASE_IMAGE=${DOCKER_UP_BASE_IMAGE:-debian:bookworm-slim}
mkdir -p "$LOGDIR"

say() { printf 'docker-up: %s\n' "$*"; }

if ! command -v dockerd >/dev/null 2>&1; then
  say "installing docker.io"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >"$LOGDIR/apt.log" 2>&1
  apt-get install -y -qq docker.io debootstrap nftables iproute2 >>"$LOGDIR/apt.log" 2>&1 \
    || { say "apt-get install failed, see $LOGDIR/apt.log"; exit 1; }
fi

if ! docker version >/dev/null 2>&1; then
  if ! pgrep -x containerd >/dev/null 2>&1; then
    say "starting containerd"
    nohup containerd >"$LOGDIR/containerd.log" 2>&1 &
    for _ in $(seq 1 50); do [ -S /run/containerd/containerd.sock ] && break; sleep 0.2; done
  fi
  say "starting dockerd"
  nohup dockerd --containerd=/run/containerd/containerd.sock >"$LOGDIR/dockerd.log" 2>&1 &
  for _ in $(seq 1 150); do docker version >/dev/null 2>&1 && break; sleep 0.2; done
  docker version >/dev/null 2>&1 || { say "dockerd did not come up, see $LOGDIR/dockerd.log"; exit 1; }
fi
say "engine $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')"

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  if timeout 20 docker pull -q "$BASE_IMAGE" >/dev/null 2>&1; then
    say "pulled $BASE_IMAGE"
  else
    command -v debootstrap >/dev/null 2>&1 || {
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq debootstrap >/dev/null 2>&1; }
    say "no registry: building $BASE_IMAGE with debootstrap"
    root=$(mktemp -d)
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian \
      >"$LOGDIR/debootstrap.log" 2>&1 || { say "debootstrap failed, see $LOGDIR/debootstrap.log"; exit 1; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | docker import -c 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
    rm -rf "$root"
  fi
fi
say "base image $BASE_IMAGE ready"

missing=()
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq "${missing[@]}"; } >>"$LOGDIR/apt.log" 2>&1 \
    || { say "apt-get install ${missing[*]} failed, see $LOGDIR/apt.log"; exit 1; }
fi
say "compose $(docker-compose version --short 2>/dev/null), registry $(docker-registry --version 2>/dev/null | awk '{print $3}')"
