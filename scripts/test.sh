#!/usr/bin/env bash
# The test command (README, .ci/run): the Debian packages the tests need (scripts/test-deps.sh:
# chromium, socat, podman...), asciinema's player in a venv under target/, then `cargo test`.
# Needs a running Docker Engine; extra arguments go to `cargo test`. Afterwards, what the tests
# left in Docker is removed (scripts/sweep-tests.sh); the exit status is cargo's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/test-deps.sh
# asciinema's own player reads yolo's terminal recordings in a test (YOLO_ASCIINEMA).
if [ ! -x target/asciinema/bin/asciinema ]; then
  python3 -m venv target/asciinema && target/asciinema/bin/pip install -q asciinema
fi
export YOLO_ASCIINEMA="$PWD/target/asciinema/bin/asciinema"
# What the tests left (a killed test, a shared image still in use when its test ended) goes
# when cargo ends, also when the run is interrupted (bash runs the trap once cargo is gone).
trap 'bash scripts/sweep-tests.sh; exit 130' INT TERM
status=0
cargo test "$@" || status=$?
trap - INT TERM
bash scripts/sweep-tests.sh
exit "$status"
