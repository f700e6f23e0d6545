#!/usr/bin/env bash
# The test command (README, .ci/run): the Debian packages the tests need (scripts/test-deps.sh:
# chromium, socat, podman...), asciinema's player in a venv under target/, then `cargo test`.
# Needs a running Docker Engine; extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/test-deps.sh
# asciinema's own player reads yolo's terminal recordings in a test (YOLO_ASCIINEMA).
if [ ! -x target/asciinema/bin/asciinema ]; then
  python3 -m venv target/asciinema && target/asciinema/bin/pip install -q asciinema
fi
export YOLO_ASCIINEMA="$PWD/target/asciinema/bin/asciinema"
exec cargo test "$@"
