#!/usr/bin/env bash
# Debian packages the tests need beyond the Docker Engine (which scripts/docker-up.sh
# installs): chromium opens the HTML report, socat forwards the engine's socket over TCP for the
# remote-engine tests, podman runs the Podman and `podman kube play` tests (catatonit: the pause
# process podman builds its Pods' infra image from), uidmap lets rootless Podman map users.
# Idempotent: installs only what is missing.
set -euo pipefail
need=()
command -v chromium >/dev/null || need+=(chromium)
command -v socat >/dev/null || need+=(socat)
command -v podman >/dev/null || need+=(podman)
command -v catatonit >/dev/null || [ -x /usr/libexec/podman/catatonit ] || need+=(catatonit)
command -v newuidmap >/dev/null || need+=(uidmap)
command -v slirp4netns >/dev/null || need+=(slirp4netns)
if [ ${#need[@]} -gt 0 ]; then
  echo "test-deps: installing ${need[*]}"
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -q >/dev/null
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi

# The rootless Podman tests run Podman and yolo as an unprivileged user of their own, set up as a
# desktop session would have it: subordinate uids and gids (useradd gives them), its runtime
# folder mounted as a tmpfs as logind mounts /run/user/UID (Podman's rootless network namespace
# needs it to be a mount point), and /dev/net/tun open to users as Debian ships it (slirp4netns
# opens it; some sandboxes make it root's only).
rootless=yolo-rootless
sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
if ! id "$rootless" >/dev/null 2>&1; then
  echo "test-deps: adding the user $rootless (rootless Podman tests)"
  $sudo useradd --create-home --shell /usr/sbin/nologin "$rootless"
fi
# A range past every range already given out (useradd gives one where login.defs says so), so the
# user's subordinate ids never overlap another user's.
for f in /etc/subuid /etc/subgid; do
  [ -e "$f" ] || $sudo touch "$f"
  if ! grep -q "^$rootless:" "$f"; then
    start=$(awk -F: 'BEGIN{m=100000} {e=$2+$3; if (e>m) m=e} END{print m}' "$f")
    echo "$rootless:$start:65536" | $sudo tee -a "$f" >/dev/null
  fi
done
uid=$(id -u "$rootless")
if ! mountpoint -q "/run/user/$uid"; then
  $sudo mkdir -p "/run/user/$uid"
  $sudo mount -t tmpfs -o "mode=700,uid=$uid,gid=$(id -g "$rootless"),size=256m" tmpfs "/run/user/$uid"
fi
[ "$(stat -c %a /dev/net/tun 2>/dev/null)" = 666 ] || $sudo chmod 666 /dev/net/tun

# Rootless Podman keeps its user namespace alive in a pause process and records that it did under
# /run/user/UID. When the pause process is gone but the record stays (its session was killed, the
# machine was restored from a snapshot), every rootless podman call fails with "invalid internal
# status"; `podman system migrate` is Podman's own reset for it.
as_rootless() {
  $sudo setpriv --reuid="$uid" --regid="$(id -g "$rootless")" --init-groups \
    env HOME="/home/$rootless" XDG_RUNTIME_DIR="/run/user/$uid" "$@"
}
if ! as_rootless podman unshare true >/dev/null 2>&1; then
  echo "test-deps: resetting rootless Podman's pause process (podman system migrate)"
  as_rootless podman system migrate >/dev/null 2>&1 || true
  if ! out=$(as_rootless podman unshare true 2>&1); then
    echo "test-deps: rootless Podman still fails after podman system migrate:" >&2
    echo "$out" >&2
    exit 1
  fi
fi
