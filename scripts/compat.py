#!/usr/bin/env python3
"""Compare yolo with the reference CLI (@devcontainers/cli) on the reference CLI's own test configs.

The configs are vendored in compat/devcontainers-cli-configs/ (see the README there). For each
config the script copies its folder to a scratch directory, runs `devcontainer up` and
`devcontainer exec <probe>` on it, removes what the reference CLI made, then runs `yolo up` and
`yolo exec <probe>` on a fresh copy at the same path and removes what yolo made. The probe prints
`whoami`, `pwd` and one environment variable the config sets. The results go into the table
between the markers of docs/compatibility.md, and the reference CLI's results into
docs/compatibility-reference.json, so that `--yolo-only` reruns (no npm, quicker) still fill
that column.

Offline method: no image registry is reachable, so before the runs the script builds a local
stand-in, FROM debian:bookworm-slim, for every base image the configs name
(mcr.microsoft.com/devcontainers/*, ubuntu, alpine, debian, mongo) and tags it with that name,
so that neither tool pulls. The stand-ins of the Dev Container images have the image's user
(vscode or node, uid 1000, passwordless sudo) and its `devcontainer.metadata` label with
`remoteUser`, as the real images do. An image that already exists under such a name and is not
a stand-in is used as it is (and never removed). Stand-ins carry the label
`dev.yolo.compat.standin` and are removed at the end unless `--keep-standins`.

Clean-up, after each tool and each config, even on failure or Ctrl-C: every container whose
`devcontainer.local_folder` label is the copy (and the rest of its Compose project: containers,
networks, volumes), every object with this run's `dev.yolo.compat` label (yolo puts
`YOLO_LABELS` on all it creates), and the images the tools built for the copy (`vsc-<folder>-*`
and those of removed containers that did not exist before). yolo runs with a throwaway
YOLO_CONFIG_DIR and YOLO_DATA_DIR.

Written in Python rather than bash because it parses JSON with comments, runs commands under a
timeout (killing the whole process group) and renders a table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "compat" / "devcontainers-cli-configs"
DOC = ROOT / "docs" / "compatibility.md"
REF_CACHE = ROOT / "docs" / "compatibility-reference.json"
CLI_VERSION = "0.88.0"
CLI_PREFIX = ROOT / "target" / "devcontainers-cli"
START = "<!-- compat-table:start -->"
END = "<!-- compat-table:end -->"
LABEL = "dev.yolo.compat"
STANDIN_LABEL = "dev.yolo.compat.standin"
SCRATCH = Path(tempfile.gettempdir()) / "yolo-compat"

# Base images the configs name → the user the real image runs as (None: root, no metadata).
DEV_BASE = "vscode"
DEV_NODE = "node"
STANDINS: dict[str, str | None] = {
    "mcr.microsoft.com/devcontainers/base:latest": DEV_BASE,
    "mcr.microsoft.com/devcontainers/base:ubuntu": DEV_BASE,
    "mcr.microsoft.com/devcontainers/base:alpine": DEV_BASE,
    "mcr.microsoft.com/devcontainers/javascript-node:1-18-bookworm": DEV_NODE,
    "mcr.microsoft.com/devcontainers/javascript-node:1-22-bookworm": DEV_NODE,
    "mcr.microsoft.com/vscode/devcontainers/javascript-node:0-16-bullseye": DEV_NODE,
    "mcr.microsoft.com/devcontainers/typescript-node:1-18-bookworm": DEV_NODE,
    "mcr.microsoft.com/devcontainers/typescript-node:0-16-bullseye": DEV_NODE,
    "mcr.microsoft.com/vscode/devcontainers/typescript-node:0-16-bullseye": DEV_NODE,
    "ubuntu:latest": None,
    "debian:latest": None,
    "alpine:latest": None,
    "alpine:3.17": None,
    "mongo:latest": None,
}
# Images that the reference CLI's own tests build before running a config.
PREBUILT = {"image-metadata-test-base": "image-metadata/base-image"}

# Facts about configs that this host cannot run as the reference tests do, shown in the notes.
# Rows with one of these (or with Features from the network) are left out of the "runnable
# here" count of the summary.
ARM_FROM = ("`FROM --platform=linux/arm64…` over an amd64 stand-in: Docker's classic builder "
            "(no BuildKit here) uses the local image anyway, so nothing runs as arm64")
ARM_OPTION = ("needs an arm64 image (build option `--platform linux/arm64…`); none is "
              "available offline")
COMPOSE_V2 = ("needs Compose v2: docker-compose v1, the one here, rejects the compose file's "
              "top-level `name`")
NOT_HERE = {
    "updateUIDarm64": ARM_FROM,
    "updateUIDarm64v8": ARM_FROM,
    "updateUIDarm64-platform-option": ARM_OPTION,
    "updateUIDarm64v8-platform-option": ARM_OPTION,
    "compose-with-name": COMPOSE_V2,
    "compose-with-name-using-env-var": COMPOSE_V2 + " (and `CUSTOM_NAME`, which the reference "
    "test sets, is unset)",
    "compose-with-name-and-custom-yaml": COMPOSE_V2 + " and its `!reset` tag",
    "image-metadata": "localFeatureB asks for `privileged`, which this host's Docker (a sandbox) "
    "cannot run: `docker run --privileged` fails here",
}
SUDO = ("its postCreateCommand runs `sudo tee /postCreateCommand.txt`: yolo's `sudo` for hooks "
        "runs it as root; where `/proc` is read-only (here, a single container) the root command "
        "is not Landlock-confined and writes the file")
SUDO_COMPOSE = ("its postCreateCommand runs `sudo tee /postCreateCommand.txt`: yolo's `sudo` for "
                "hooks runs it as root; Compose has no `ReadonlyPaths`, so yolo makes the dev "
                "service's container again with a read-only `/proc`, and the root command is "
                "not Landlock-confined there either")
NOTES = {
    "dockerfile-without-features": SUDO,
    "compose-Dockerfile-without-features": SUDO_COMPOSE,
    "image-containerEnv-issue": "the compose file mounts `../..` at /workspaces, so "
    "`workspaceFolder` /workspaces/cli exists only in the reference's own checkout; here the "
    "probe's working folder is missing",
    "image-with-local-feature": "`myfeature` (no `./`) is a legacy Feature id, and its "
    "devcontainer-feature.json is empty",
}
NOT_UP = {
    "set-up-with-config": "a config for `devcontainer set-up` on a running container, not for `up`",
    "set-up-with-metadata": "an image for `devcontainer set-up`, not a config for `up`",
}

PROBE_SCRIPT = 'echo "user=$(whoami)"; echo "pwd=$(pwd)"; {env}'


class Stop(Exception):
    """SIGTERM or SIGHUP: leave through the clean-up."""


def on_signal(signum, _frame):
    raise Stop(f"signal {signum}")


# ---------------------------------------------------------------------------------------------
# Small helpers


def run(cmd, timeout=None, env=None, cwd=None, check=False, input_text=None):
    """Runs cmd in its own process group; on timeout kills the group. Returns (code, out, err);
    code is None on timeout."""
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(input=input_text, timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    if check and code != 0:
        raise SystemExit(f"compat: {' '.join(map(str, cmd))} failed ({code}):\n{err[-2000:]}")
    return code, out, err


def docker(*args, check=False, timeout=300):
    return run(["docker", *args], timeout=timeout, check=check)


def lines(text):
    return [line for line in text.split() if line]


def jsonc(text: str):
    """JSON with comments and trailing commas (devcontainer.json's dialect) → value."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            i = text.find("*/", i + 2) + 2 if text.find("*/", i + 2) >= 0 else n
        else:
            out.append(c)
            i += 1
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", "".join(out)))


def cell(text: str, limit=160) -> str:
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|")


# ---------------------------------------------------------------------------------------------
# The configs


class Row:
    """One config: a folder and, when not the default one, the config file in it."""

    def __init__(self, folder: str, config: str | None, discovered: bool):
        self.folder = folder
        self.config = config  # relative to the folder
        self.discovered = discovered  # the default file both tools find on their own
        self.name = folder if discovered or folder in NOT_UP else f"{folder} ({config})"
        self.data = {}
        if config:
            try:
                self.data = jsonc((CONFIGS / folder / config).read_text())
            except (ValueError, OSError) as err:
                self.data = {"_error": str(err)}

    @property
    def key(self):
        return self.name

    def features(self):
        return list((self.data.get("features") or {}).keys())

    def remote_features(self):
        """Features fetched from a registry or GitHub: every id with a `/` but a local path
        (an id without one is a legacy Feature of the CLI's own cache)."""
        return [f for f in self.features() if "/" in f and not f.startswith(("./", "../"))]

    def probe_var(self):
        """The first variable remoteEnv or containerEnv sets to a plain value."""
        for section in ("remoteEnv", "containerEnv"):
            for name, value in (self.data.get(section) or {}).items():
                if isinstance(value, str) and "${" not in value and "\n" not in value:
                    return name, value
        return None

    def compose(self):
        files = self.data.get("dockerComposeFile")
        if not files:
            return None
        files = [files] if isinstance(files, str) else files
        base = (CONFIGS / self.folder / self.config).parent
        return [base / f for f in files]

    def exercises(self) -> str:
        d = self.data
        if self.folder in NOT_UP:
            return "`devcontainer set-up`"
        parts = []
        if d.get("image"):
            parts.append(f"image `{d['image']}`")
        build = d.get("build") or ({"dockerfile": d["dockerFile"]} if d.get("dockerFile") else None)
        if build:
            extra = [k for k in ("target", "options", "args") if build.get(k)]
            parts.append("Dockerfile" + (f" ({', '.join(extra)})" if extra else ""))
            df = (CONFIGS / self.folder / self.config).parent / build.get("dockerfile", "")
            if df.is_file() and "--platform" in df.read_text():
                parts.append("`FROM --platform`")
        compose = self.compose()
        if compose:
            desc = "Compose"
            try:
                text = compose[0].read_text()
                services = re.findall(r"^  (\w[\w-]*):\s*$", text, re.M)
                if len(services) > 1:
                    desc += f" ({len(services)} services)"
                if re.search(r"^\s+build:", text, re.M):
                    desc += ", build"
                if re.search(r"^name:", text, re.M):
                    desc += ", project `name`"
            except OSError:
                pass
            parts.append(desc)
        feats = self.features()
        if feats:
            short = [re.sub(r"^ghcr\.io/devcontainers/(features/)?", "", f) for f in feats]
            parts.append("Features " + ", ".join(f"`{s}`" for s in short))
        for key in ("remoteUser", "containerUser"):
            if d.get(key):
                parts.append(f"{key} `{d[key]}`")
        hooks = [
            h
            for h in (
                "initializeCommand",
                "onCreateCommand",
                "updateContentCommand",
                "postCreateCommand",
                "postStartCommand",
                "postAttachCommand",
            )
            if h in d
        ]
        if hooks:
            parallel = any(isinstance(d[h], dict) for h in hooks)
            parts.append(("parallel " if parallel else "") + "hooks (" + ", ".join(
                h.replace("Command", "") for h in hooks) + ")")
        for key in ("remoteEnv", "containerEnv"):
            if d.get(key):
                subst = any("${" in str(v) for v in d[key].values())
                parts.append(key + (" with `${…}`" if subst else ""))
        for key in ("mounts", "runArgs", "workspaceFolder"):
            if d.get(key):
                parts.append(f"{key}" + (f" `{d[key]}`" if key == "workspaceFolder" else ""))
        if d.get("_error"):
            parts.append("unreadable: " + d["_error"])
        return "; ".join(parts)


def discover() -> list[Row]:
    rows = []
    for folder in sorted(p.name for p in CONFIGS.iterdir() if p.is_dir()):
        base = CONFIGS / folder
        found = []
        # The spec's order, which both tools follow.
        if (base / ".devcontainer" / "devcontainer.json").is_file():
            found.append((".devcontainer/devcontainer.json", True))
        if (base / ".devcontainer.json").is_file():
            found.append((".devcontainer.json", True))
        for sub in sorted((base / ".devcontainer").glob("*/devcontainer.json")):
            found.append((str(sub.relative_to(base)), False))
        if not found:
            if (base / "devcontainer.json").is_file():
                found.append(("devcontainer.json", False))
            else:
                found.append((None, False))
        # The first default file is what both tools find without --config.
        seen_default = False
        for config, default in found:
            discovered = default and not seen_default
            seen_default = seen_default or default
            rows.append(Row(folder, config, discovered))
    return rows


# ---------------------------------------------------------------------------------------------
# Stand-in images


STANDIN_DEV = """FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends sudo \\
    && rm -rf /var/lib/apt/lists/*
RUN useradd -m -s /bin/bash -u 1000 -U {user} \\
    && echo '{user} ALL=(root) NOPASSWD:ALL' > /etc/sudoers.d/{user}
LABEL {standin}="{name}"
LABEL devcontainer.metadata={metadata}
"""
STANDIN_PLAIN = """FROM debian:bookworm-slim
LABEL {standin}="{name}"
{cmd}
"""


def image_labels(name):
    code, out, _ = docker("image", "inspect", "--format", "{{json .Config.Labels}}", name)
    if code != 0:
        return None
    return json.loads(out or "null") or {}


def build_standins(log) -> dict[str, str]:
    """Builds every stand-in not present; returns name → 'stand-in' or 'real image'."""
    origin = {}
    for name, user in STANDINS.items():
        labels = image_labels(name)
        if labels is not None and STANDIN_LABEL not in labels:
            origin[name] = "real image"
            continue
        if user:
            metadata = json.dumps(
                [{"id": "ghcr.io/devcontainers/features/common-utils:2"}, {"remoteUser": user}]
            )
            dockerfile = STANDIN_DEV.format(
                user=user, standin=STANDIN_LABEL, name=name, metadata=json.dumps(metadata)
            )
        else:
            # mongo's real command is the server; the stand-in must keep running too.
            cmd = 'CMD ["sleep", "infinity"]' if name.startswith("mongo") else ""
            dockerfile = STANDIN_PLAIN.format(standin=STANDIN_LABEL, name=name, cmd=cmd)
        log(f"stand-in {name}")
        code, _, err = run(["docker", "build", "-q", "-t", name, "-"], timeout=600,
                           input_text=dockerfile)
        if code != 0:
            raise SystemExit(f"compat: building the stand-in {name} failed:\n{err[-2000:]}")
        origin[name] = "stand-in"
    for name, folder in PREBUILT.items():
        labels = image_labels(name)
        if labels is not None and STANDIN_LABEL not in labels:
            continue
        log(f"prebuilt {name} (as the reference tests do)")
        run(["docker", "build", "-q", "--label", f"{STANDIN_LABEL}={name}", "-t", name,
             str(CONFIGS / folder)], timeout=600, check=True)
    return origin


def standin_ids() -> set[str]:
    """The stand-ins themselves (images built FROM one inherit its label, so not by label)."""
    ids = set()
    for name in [*STANDINS, *PREBUILT]:
        code, out, _ = docker("image", "inspect", "--format",
                              f'{{{{.Id}}}} {{{{index .Config.Labels "{STANDIN_LABEL}"}}}}', name)
        if code == 0:
            image, _, label = out.strip().partition(" ")
            if label == name:
                ids.add(image)
    return ids


def remove_standins():
    """The stand-ins and what was built FROM them (which inherits their label): children first,
    so a few passes."""
    for _ in range(4):
        _, out, _ = docker("images", "-q", "--filter", f"label={STANDIN_LABEL}")
        ids = sorted(set(lines(out)))
        if not ids:
            break
        for image in ids:
            docker("rmi", "-f", image)


# ---------------------------------------------------------------------------------------------
# Clean-up


def all_image_ids():
    _, out, _ = docker("images", "-aq", "--no-trunc")
    return set(lines(out))


def cleanup(copy: Path, run_label: str, before_images: set[str]):
    """Removes what either tool made for `copy` (and everything with this run's label)."""
    containers, images = set(), set()
    # The Compose project the reference CLI names after the folder (when the compose file does
    # not name one), so images of a run that failed before making a container go too.
    projects = {re.sub(r"[^a-z0-9_-]", "", copy.name.lower()) + "_devcontainer"}
    _, out, _ = docker("ps", "-aq", "--no-trunc", "--filter", "label=devcontainer.local_folder")
    ids = lines(out)
    if ids:
        _, out, _ = docker("inspect", "--format",
                           "{{.Id}} {{.Image}} {{json .Config.Labels}}", *ids)
        for line in out.splitlines():
            # A container of someone else's can go between `ps` and `inspect`: skip what is odd.
            parts = line.split(" ", 2)
            if len(parts) != 3:
                continue
            cid, image, labels = parts
            try:
                labels = json.loads(labels) or {}
            except ValueError:
                continue
            folder = labels.get("devcontainer.local_folder", "")
            if folder == str(copy) or folder.startswith(str(copy) + "/"):
                containers.add(cid)
                images.add(image)
                if labels.get("com.docker.compose.project"):
                    projects.add(labels["com.docker.compose.project"])
    for filt in [f"label={run_label}"] + [f"label=com.docker.compose.project={p}" for p in projects]:
        _, out, _ = docker("ps", "-aq", "--no-trunc", "--filter", filt)
        for cid in lines(out):
            containers.add(cid)
            _, img, _ = docker("inspect", "--format", "{{.Image}}", cid)
            images.add(img.strip())
    if containers:
        docker("rm", "-fv", *sorted(containers))
    for filt in [f"label={run_label}"] + [f"label=com.docker.compose.project={p}" for p in projects]:
        _, out, _ = docker("network", "ls", "-q", "--filter", filt)
        if lines(out):
            docker("network", "rm", *lines(out))
        _, out, _ = docker("volume", "ls", "-q", "--filter", filt)
        if lines(out):
            docker("volume", "rm", "-f", *lines(out))
    # Images: those the tools built for this copy, never a stand-in or one that was there before.
    folder = copy.name.lower()
    _, out, _ = docker("images", "-q", "--no-trunc", "--filter", f"reference=vsc-{folder}-*")
    images.update(lines(out))
    for filt in [f"label={run_label}"] + [f"label=com.docker.compose.project={p}" for p in projects]:
        _, out, _ = docker("images", "-q", "--no-trunc", "--filter", filt)
        images.update(lines(out))
    for project in projects:
        for sep in ("_", "-"):
            _, out, _ = docker("images", "-q", "--no-trunc", "--filter",
                               f"reference={project}{sep}*")
            images.update(lines(out))
    standins = standin_ids()
    # The helper image the reference CLI builds for Features without BuildKit.
    _, out, _ = docker("images", "-q", "--no-trunc", "--filter",
                       "reference=dev_container_feature_content_temp")
    images.update(lines(out))
    # By name first: an image the build cache shares with another tag loses only this tag.
    for ref in lines(docker("images", "--format", "{{.Repository}}:{{.Tag}}", "--filter",
                            f"reference=vsc-{folder}-*")[1]):
        docker("rmi", ref)
    doomed = {i for i in images if i and i not in before_images and i not in standins}
    # A parent goes only after its children (the reference CLI builds `-uid` and Feature images
    # on top of the one Compose built): a few passes, one image at a time.
    for _ in range(4):
        doomed &= all_image_ids()
        if not doomed:
            break
        for image in sorted(doomed):
            docker("rmi", "-f", image)
    if doomed & all_image_ids():
        print(f"compat: could not remove images {sorted(doomed & all_image_ids())}", flush=True)


def sweep_leftovers():
    """Objects an earlier, killed run left: anything with the compat label key, any container
    of a scratch copy."""
    _, out, _ = docker("ps", "-aq", "--filter", f"label={LABEL}")
    ids = set(lines(out))
    _, out, _ = docker("ps", "-aq", "--filter", "label=devcontainer.local_folder")
    for cid in lines(out):
        _, folder, _ = docker("inspect", "--format",
                              '{{index .Config.Labels "devcontainer.local_folder"}}', cid)
        if folder.strip().startswith(str(SCRATCH) + "/"):
            ids.add(cid)
    if ids:
        docker("rm", "-fv", *sorted(ids))
    for kind in ("network", "volume"):
        _, out, _ = docker(kind, "ls", "-q", "--filter", f"label={LABEL}")
        if lines(out):
            docker(kind, "rm", *lines(out))
    _, out, _ = docker("images", "-q", "--filter", f"label={LABEL}")
    if lines(out):
        docker("rmi", "-f", *sorted(set(lines(out))))
    # Stand-ins a rebuild replaced.
    _, out, _ = docker("images", "-q", "--filter", "dangling=true", "--filter",
                       f"label={STANDIN_LABEL}")
    for image in sorted(set(lines(out))):
        docker("rmi", image)


# ---------------------------------------------------------------------------------------------
# Running the tools


def probe_command(row: Row):
    var = row.probe_var()
    env = f'echo "env=${{{var[0]}-<unset>}}"' if var else "true"
    return ["sh", "-c", PROBE_SCRIPT.format(env=env)]


def parse_probe(out: str):
    got = {}
    for line in out.splitlines():
        for key in ("user", "pwd", "env"):
            if line.startswith(key + "="):
                got[key] = line[len(key) + 1 :]
    return got


def last_error(text: str) -> str:
    """The most telling line of a failed run's output."""
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    keep = [line.strip() for line in text.splitlines() if line.strip()]
    for pattern in (r"^error", r"error", r"failed", r"refuses", r"not "):
        for line in reversed(keep):
            if re.search(pattern, line, re.I) and not line.startswith("at "):
                return line
    return keep[-1] if keep else "(no output)"


def ref_cli() -> Path:
    cli = CLI_PREFIX / "node_modules" / ".bin" / "devcontainer"
    if not cli.exists():
        print(f"compat: installing @devcontainers/cli@{CLI_VERSION} into {CLI_PREFIX}", flush=True)
        CLI_PREFIX.mkdir(parents=True, exist_ok=True)
        run(["npm", "install", "--prefix", str(CLI_PREFIX), "--no-audit", "--no-fund",
             f"@devcontainers/cli@{CLI_VERSION}"], timeout=600, check=True)
    return cli


def run_reference(cli: Path, row: Row, copy: Path, scratch: Path, timeout: int) -> dict:
    args = ["--workspace-folder", str(copy)]
    if not row.discovered:
        args += ["--config", str(copy / row.config)]
    env = dict(os.environ)
    # Its temporary files (generated Dockerfiles, compose overrides) go with the scratch folder.
    env["TMPDIR"] = str(scratch / "ref-tmp")
    (scratch / "ref-tmp").mkdir(exist_ok=True)
    t0 = time.monotonic()
    code, out, err = run([str(cli), "up", "--log-format", "text", *args], timeout=timeout, env=env)
    result = {"up_exit": code, "seconds": round(time.monotonic() - t0)}
    outcome = {}
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                outcome = json.loads(line)
                break
            except ValueError:
                pass
    if code is None:
        result.update(status="fails", why=f"timed out after {timeout} s")
        return result
    if code != 0 or outcome.get("outcome") != "success":
        why = outcome.get("message") or last_error(err + out)
        if why.startswith("Command failed:"):
            # The command line is long and says little; Docker's own error says why.
            words = why.split()
            plain = [re.sub(r"^\[[^\]]*\]\s*", "", line.strip()) for line in err.splitlines()]
            telling = r"Error response from daemon|^ERROR|error:|does not match|is invalid"
            detail = [line for line in plain if re.search(telling, line)]
            why = f"`{' '.join(words[2:4])}` failed" + (f": {detail[-1]}" if detail else "")
        if outcome.get("description") and outcome["description"] not in why:
            why += " (" + outcome["description"] + ")"
        result.update(status="fails", why=why)
        return result
    code, out, err = run([str(cli), "exec", *args, *probe_command(row)], timeout=120, env=env)
    result.update(probe_exit=code, **parse_probe(out))
    result["status"] = "started"
    if code != 0:
        result["why"] = f"exec exited {code}: {last_error(err + out)}"
    return result


def grant_flag(err: str) -> str | None:
    """The flag a policy refusal names: "... unless you grant it: --grant NAME, or ..." or
    "--trust-host-commands, or ..."."""
    m = re.search(r"grant it: (--[\w-]+)(?:[ =]([^\s,;]+))?", err)
    if not m:
        return None
    return f"--grant={m.group(2)}" if m.group(1) == "--grant" and m.group(2) else m.group(1)


def run_yolo(yolo: Path, row: Row, copy: Path, scratch: Path, run_label: str, timeout: int):
    base = ["-w", str(copy)]
    if not row.discovered:
        base += ["--config", str(copy / row.config)]
    env = dict(os.environ)
    env.update(
        YOLO_CONFIG_DIR=str(scratch / "yolo-config"),
        YOLO_DATA_DIR=str(scratch / "yolo-data"),
        YOLO_LABELS=run_label,
    )
    grants: list[str] = []
    refused: list[str] = []
    result = {}
    t0 = time.monotonic()
    for _ in range(4):
        code, out, err = run([str(yolo), "up", "--accept-config", *base, *grants],
                             timeout=timeout, env=env)
        result = {"up_exit": code, "seconds": round(time.monotonic() - t0)}
        if code is None:
            result.update(status="fails", why=f"timed out after {timeout} s")
            break
        if code == 77:
            flag = grant_flag(err)
            if flag and flag not in grants:
                refused.append(flag)
                grants.append(flag)
                continue
            result.update(status="refused", why=last_error(err))
            break
        if code != 0:
            result.update(status="fails",
                          why=f"exit {code}: {re.sub(r'^yolo: ', '', last_error(err + out))}")
            break
        code, out, err = run([str(yolo), "exec", *base, "--", *probe_command(row)],
                             timeout=120, env=env)
        result.update(probe_exit=code, **parse_probe(out))
        result["status"] = "started"
        if code != 0:
            result["why"] = f"exec exited {code}: {last_error(err + out)}"
        break
    result["grants"] = grants
    result["refused"] = refused
    run([str(yolo), "down", "--remove", "--volumes", *base], timeout=120, env=env)
    return result


# ---------------------------------------------------------------------------------------------
# The table


def describe(result: dict | None, tool: str) -> str:
    if not result:
        return "not run"
    status = result.get("status")
    if status == "skipped":
        return "n/a"
    probe = ""
    if result.get("user") is not None:
        probe = f" · `{result.get('user')}` in `{result.get('pwd')}`"
        if result.get("env") is not None:
            probe += f" · env `{result['env']}`"
    if status == "started":
        text = "**started**"
        if tool == "yolo" and result.get("refused"):
            text = ("refused by policy without " + ", ".join(
                f"`{g}`" for g in result["refused"]) + "; with it: **started**")
        if result.get("probe_exit") not in (0, None):
            text += f" (exec failed: {result.get('why', '')})"
        return cell(text + probe, 260)
    if tool == "yolo" and result.get("refused"):
        granted = ", ".join(f"`{g}`" for g in result["refused"])
        return cell(f"refused by policy without {granted}; with it: fails: {result.get('why')}", 260)
    if status == "refused":
        return cell(f"refused by policy: {result.get('why')}", 260)
    return cell(f"fails: {result.get('why')}", 260)


def notes_for(row: Row, ref: dict | None, yolo: dict | None, origins: dict) -> str:
    notes = []
    if row.folder in NOT_UP:
        return NOT_UP[row.folder]
    remote = row.remote_features()
    if remote:
        notes.append("needs network (Features from ghcr.io or GitHub: "
                     + ", ".join(f"`{f}`" for f in remote) + ")")
    for table in (NOT_HERE, NOTES):
        if row.folder in table:
            notes.append(table[row.folder])
    if ref and yolo and ref.get("status") == "started" and yolo.get("status") == "started":
        for key, what in (("user", "user"), ("pwd", "folder"), ("env", "env")):
            if ref.get(key) != yolo.get(key):
                notes.append(f"{what} differs: reference `{ref.get(key)}`, yolo `{yolo.get(key)}`")
    return cell("; ".join(notes), 400)


def render(rows, ref_results, yolo_results, origins, meta) -> str:
    run_rows = [r for r in rows if r.folder not in NOT_UP]
    m = len(run_rows)
    n = sum(1 for r in run_rows if (yolo_results.get(r.key) or {}).get("status") == "started")
    n_plain = sum(1 for r in run_rows
                  if (yolo_results.get(r.key) or {}).get("status") == "started"
                  and not (yolo_results.get(r.key) or {}).get("refused"))
    k = sum(1 for r in run_rows if (ref_results.get(r.key) or {}).get("status") == "started")
    offline = [r for r in run_rows if not r.remote_features() and r.folder not in NOT_HERE]
    k_off = sum(1 for r in offline if (ref_results.get(r.key) or {}).get("status") == "started")
    n_off = sum(1 for r in offline if (yolo_results.get(r.key) or {}).get("status") == "started")
    summary = (f"{n} of {m} configs start with yolo ({n_plain} without a grant), "
               f"{k} of {m} with the reference CLI. Of the {len(offline)} that this host can run "
               f"as the reference tests do (no Feature from the network, no arm64, no Compose "
               f"v2, no privileged): {n_off} with yolo, {k_off} with the reference CLI.")
    out = [START, "", f"**{summary}**", ""]
    out.append(f"yolo: {meta['yolo']}, run {meta['yolo_date']}. Reference CLI: "
               f"@devcontainers/cli {meta['ref_version']}, run {meta['ref_date']}.")
    out += ["", "| config | what it exercises | reference CLI | yolo | notes |",
            "| --- | --- | --- | --- | --- |"]
    for r in rows:
        ref = ref_results.get(r.key)
        yolo = yolo_results.get(r.key)
        out.append("| " + " | ".join([
            cell(f"`{r.name}`", 200),
            cell(r.exercises(), 300),
            describe(ref, "ref"),
            describe(yolo, "yolo"),
            notes_for(r, ref, yolo, origins),
        ]) + " |")
    used = sorted(n for n, o in origins.items() if o == "real image")
    if used:
        out += ["", "Real images used (present on the host): " + ", ".join(f"`{u}`" for u in used)]
    out += ["", END]
    return "\n".join(out), summary


# ---------------------------------------------------------------------------------------------


def build_yolo(release: bool) -> Path:
    profile = "release" if release else "debug"
    cmd = ["cargo", "build", "-p", "yolo"] + (["--release"] if release else [])
    print(f"compat: {' '.join(cmd)}", flush=True)
    code = subprocess.call(cmd, cwd=ROOT)
    if code != 0:
        raise SystemExit("compat: building yolo failed")
    return ROOT / "target" / profile / "yolo"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--yolo-only", action="store_true",
                    help="skip the reference CLI; its column comes from "
                    "docs/compatibility-reference.json")
    ap.add_argument("--only", action="append", default=[],
                    help="run only configs whose name contains this (repeatable); the other "
                    "rows keep their results from the current table's JSON")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per tool per config")
    ap.add_argument("--yolo", type=Path, help="yolo binary to use (default: build target/debug/yolo)")
    ap.add_argument("--release", action="store_true", help="build and use target/release/yolo")
    ap.add_argument("--keep-standins", action="store_true",
                    help="keep the stand-in base images for a quicker rerun")
    ap.add_argument("--no-write", action="store_true", help="print, do not update docs/")
    args = ap.parse_args()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    rows = discover()
    yolo = args.yolo or build_yolo(args.release)
    cli = None if args.yolo_only else ref_cli()

    cache = json.loads(REF_CACHE.read_text()) if REF_CACHE.exists() else {}
    ref_results = dict(cache.get("results", {}))
    yolo_cache = cache.get("yolo_results", {})
    yolo_results = dict(yolo_cache) if args.only else {}
    meta = {
        "ref_version": cache.get("version", CLI_VERSION),
        "ref_date": cache.get("date", "never"),
        "yolo": "",
        "yolo_date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    _, ver, _ = run([str(yolo), "--version"], timeout=30)
    commit = run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], timeout=30)[1].strip()
    dirty = run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "crates"], timeout=30)[1]
    meta["yolo"] = f"`{ver.strip()}` at commit `{commit}`" + (" (with local changes)" if dirty.strip() else "")

    stamp = f"{os.getpid()}-{int(time.time())}"
    run_label = f"{LABEL}={stamp}"
    SCRATCH.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=SCRATCH))

    def log(msg):
        print(f"compat: {msg}", flush=True)

    origins = {}
    try:
        sweep_leftovers()
        origins = build_standins(log)
        selected = [r for r in rows if not args.only or any(o in r.name for o in args.only)]
        for i, row in enumerate(selected, 1):
            if row.folder in NOT_UP or row.config is None:
                ref_results[row.key] = {"status": "skipped"}
                yolo_results[row.key] = {"status": "skipped"}
                continue
            slot = scratch / f"{i:02d}"
            copy = slot / row.folder
            before = all_image_ids()
            for tool in (["ref"] if cli else []) + ["yolo"]:
                shutil.rmtree(slot, ignore_errors=True)
                shutil.copytree(CONFIGS / row.folder, copy, symlinks=True)
                log(f"[{i}/{len(selected)}] {row.name}: {tool}")
                try:
                    if tool == "ref":
                        res = run_reference(cli, row, copy, scratch, args.timeout)
                        ref_results[row.key] = res
                    else:
                        res = run_yolo(yolo, row, copy, scratch, run_label, args.timeout)
                        yolo_results[row.key] = res
                    for key in ("why",):
                        if isinstance(res.get(key), str):
                            res[key] = res[key].replace(str(copy) + "/", "").replace(
                                str(copy), ".").replace(str(scratch), "$SCRATCH")
                    log(f"    {res.get('status')} {res.get('user', '')} {res.get('pwd', '')} "
                        f"{res.get('env', '')} {res.get('why', '')}"[:300])
                finally:
                    try:
                        cleanup(copy, run_label, before)
                    except Exception as err:  # noqa: BLE001 - the run goes on; the sweep retries
                        log(f"    clean-up failed ({err!r}); the final sweep tries again")
            shutil.rmtree(slot, ignore_errors=True)
    finally:
        try:
            sweep_leftovers()
            if not args.keep_standins:
                remove_standins()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if cli:
        meta["ref_date"] = now
        meta["ref_version"] = CLI_VERSION
    table, summary = render(rows, ref_results, yolo_results, origins, meta)
    if args.no_write:
        print(table)
    else:
        REF_CACHE.write_text(json.dumps({
            "version": meta["ref_version"],
            "date": meta["ref_date"],
            "results": ref_results,
            "yolo_results": yolo_results,
        }, indent=1, sort_keys=True) + "\n")
        text = DOC.read_text()
        start, end = text.index(START), text.index(END) + len(END)
        DOC.write_text(text[:start] + table + text[end:])
    print(f"compat: {summary}")


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, Stop) as stop:
        sys.exit(f"compat: stopped ({stop or 'Ctrl-C'}); cleaned up")
