# yolo's one-time root setup in a new project container, run as `sh -c <this> yolo-setup USER
# UID GID STATE [WORKSPACE]`: match USER's uid/gid to the host user's (UID, GID; empty: keep),
# so files in the workspace stay the host user's, let login shells keep the container's PATH,
# and hand the agent state volumes under STATE to USER. As the reference CLI's updateUID.Dockerfile: a uid taken by another user leaves USER
# alone; a gid taken by another group leaves USER in its own group (only the uid changes).
# WORKSPACE (the bind's mount point): in a user namespace (this container's uid map is not the
# identity), the host user is another id in here, and the workspace's owner as seen here is
# what USER must be; mapped to root (rootless Podman or Docker: root here is the host user), no
# uid but 0 would do, so USER is left alone and the note says what works. Without a user
# namespace the host's ids are used, as the reference CLI does.
set -u
u="$1"; uid="$2"; gid="$3"; state="$4"; ws="${5:-}"
mapped=no
if [ -r /proc/self/uid_map ]; then
  read -r inside outside count < /proc/self/uid_map || true
  [ "${inside:-0} ${outside:-0} ${count:-4294967295}" = "0 0 4294967295" ] || mapped=yes
fi
if [ "$mapped" = yes ] && [ "$u" != root ] && [ -n "$uid" ] && [ -n "$ws" ] && [ -d "$ws" ]; then
  seen_uid=$(stat -c %u "$ws" 2>/dev/null || echo "$uid")
  seen_gid=$(stat -c %g "$ws" 2>/dev/null || echo "$gid")
  if [ "$seen_uid" = 65534 ]; then
    : # the owner is not mapped in here (Docker's userns-remap maps only its own range): the host's ids
  elif [ "$seen_uid" = 0 ] && [ "$uid" != 0 ]; then
    echo "the engine maps your user to root in this container (a rootless engine): $u cannot own or write the workspace whatever its uid; set \"remoteUser\": \"root\" (root here is you on the host, with the container's capabilities only), or use a rootful engine (docs/podman.md)"
    uid=""
  elif [ "$seen_uid" != "$uid" ]; then
    uid="$seen_uid"; gid="$seen_gid"
  fi
fi
if [ "$u" != root ] && [ -n "$uid" ] && id "$u" >/dev/null 2>&1; then
  cur_uid=$(id -u "$u"); cur_gid=$(id -g "$u")
  if [ "$cur_uid" != "$uid" ] || [ "$cur_gid" != "$gid" ]; then
    if ! command -v usermod >/dev/null 2>&1; then
      echo "usermod not found: cannot match $u's uid to the host's ($uid)"
    elif [ "$cur_uid" != "$uid" ] && getent passwd "$uid" >/dev/null; then
      echo "uid $uid is taken in the image ($(getent passwd "$uid" | cut -d: -f1)): keeping $u at $cur_uid"
    else
      if [ "$cur_gid" != "$gid" ] && getent group "$gid" >/dev/null; then
        echo "gid $gid is taken in the image ($(getent group "$gid" | cut -d: -f1)): $u keeps its group ($cur_gid)"
        gid="$cur_gid"
      fi
      if [ "$cur_gid" != "$gid" ]; then groupmod -g "$gid" "$(id -gn "$u")"; fi
      usermod -u "$uid" -g "$gid" "$u" >/dev/null
    fi
  fi
fi
# As the reference CLI does once per container: login shells keep the container's PATH instead
# of /etc/profile's own (Debian's has no sbin folders for users other than root).
sed -i -E 's/((^|\s)PATH=)([^\$]*)$/\1${PATH:-\3}/g' /etc/profile 2>/dev/null || true
if [ -d "$state" ] && id "$u" >/dev/null 2>&1; then
  # chown needs CAP_CHOWN, which this exec lacks when the container's user is not root (Docker
  # gives an exec the capabilities of the container's process). Then the folders are opened to
  # every user, sticky like /tmp: their owner (root, this exec) needs no capability for that.
  chown "$(id -u "$u"):$(id -g "$u")" "$state"/* 2>/dev/null \
    || chmod 1777 "$state"/* 2>/dev/null || true
fi
exit 0
