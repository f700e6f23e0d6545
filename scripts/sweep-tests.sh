#!/usr/bin/env bash
# Removes from the Docker Engine what the tests made and left: everything labelled
# dev.yolo.test=t<pid namespace>n<pid>x<time> (hex) whose test process is gone. A test's drop
# removes what it made, but not what its process was killed before removing, nor a shared
# image another test's container still used when it tried (the guard image). Run by
# scripts/test.sh after `cargo test`, and by the tests before their first Docker test, with
# YOLO_KEEP_TEST_IMAGES=1 (tests/support/mod.rs `sweep_dead_runs`). A test run still going (another clone's, another
# container's) keeps its things. Then the helper images the tests share (label
# dev.yolo.test-fixture), unless YOLO_KEEP_TEST_IMAGES=1 or another run is going.
set -uo pipefail
command -v docker >/dev/null || exit 0
docker info >/dev/null 2>&1 || exit 0
label=dev.yolo.test
ids=$(
  {
    docker ps -a --filter "label=$label" --format "{{.Label \"$label\"}}"
    docker volume ls --filter "label=$label" --format "{{.Label \"$label\"}}"
    docker network ls --filter "label=$label" --format "{{.Label \"$label\"}}"
    images=$(docker images -q --filter "label=$label")
    [ -n "$images" ] && docker image inspect --format "{{index .Config.Labels \"$label\"}}" $images
  } 2>/dev/null | sort -u
)
# Pids mean something only in their pid namespace: a run in another container on this engine
# is never swept from here (nor its helper images).
ns=$(readlink /proc/$$/ns/pid)
ns=${ns#pid:[}
ns=${ns%]}
live=0
for id in $ids; do
  [[ $id =~ ^t([0-9a-f]+)n([0-9a-f]+)x[0-9a-f]+$ ]] || continue
  if [ "$((16#${BASH_REMATCH[1]}))" != "$ns" ] || [ -e "/proc/$((16#${BASH_REMATCH[2]}))" ]; then
    live=1
    continue
  fi
  filter="label=$label=$id"
  containers=$(docker ps -aq --filter "$filter")
  [ -n "$containers" ] && docker rm -f -v $containers >/dev/null 2>&1
  for kind in volume network; do
    for obj in $(docker $kind ls -q --filter "$filter"); do
      docker $kind rm "$obj" >/dev/null 2>&1
    done
  done
  for image in $(docker images -q --filter "$filter"); do
    docker rmi -f "$image" >/dev/null 2>&1
  done
done
# The helper images the tests share (tests/support/net.rs `ensure_image`), unless asked to keep
# them for the next run or a test run still going uses them.
if [ "${YOLO_KEEP_TEST_IMAGES:-}" != 1 ] && [ "$live" = 0 ]; then
  for image in $(docker images -q --filter label=dev.yolo.test-fixture); do
    docker rmi -f "$image" >/dev/null 2>&1
  done
fi
exit 0
