#!/usr/bin/env python3
"""Run `yolo up` with no flag on a corpus of real repositories' dev container configs.

The corpus is compat/corpus/<owner>__<repo>/: each folder holds the config files of one public
repository at their paths in it (devcontainer.json and the Dockerfiles and Compose files it
names) and a SOURCES file (the repository, and each file's path and commit). See
compat/corpus/README.md.

For each entry the script copies the folder to a scratch workspace named after the repository,
runs `yolo up --accept-config` there with a throwaway YOLO_CONFIG_DIR and YOLO_DATA_DIR and
stdin closed (an initializeCommand is then declined, as for anyone who cannot answer), then
`yolo down --remove --volumes`, and removes what was made (compat.py's clean-up: everything with
this run's label, the Compose project, the images built). It writes the table between the
markers of the "Real repositories" section of docs/compatibility.md.

This machine is offline and no stand-in images are made: the outcome says how far yolo went.
- started: the container runs;
- network: yolo's checks passed (the config parsed, the policy made the run spec, declining
  what it does not honour) and the engine or yolo was then asked for something only the network
  gives (an image pull, a Feature from its registry, a download in a build step);
- engine: yolo handed the config to the engine or to docker-compose, which stopped for another
  reason (a file of the repository that is not in the corpus, such as an uncommitted env file; a
  Compose form this docker-compose version rejects; a build step failing);
- policy: yolo refused the config (exit 77);
- config: yolo rejected the config (exit 65);
- failed: anything else (a timeout, another exit), with its message.
"Reached the point where only the network stops them" is started + network.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compat  # noqa: E402  (the shared runner, JSONC reader and clean-up)

ROOT = compat.ROOT
CORPUS = ROOT / "compat" / "corpus"
DOC = ROOT / "docs" / "compatibility.md"
START = "<!-- corpus-table:start -->"
END = "<!-- corpus-table:end -->"
SCRATCH = Path(tempfile.gettempdir()) / "yolo-corpus"

# What an error says when the network is what stopped it: the registry, a pull, a name lookup,
# a download inside a build step.
NETWORK = re.compile(
    r"cannot reach the registry|pull access denied|error pulling|failed to resolve|"
    r"no such host|name resolution|Could not resolve|Temporary failure resolving|"
    r"network is unreachable|dial tcp|i/o timeout|TLS handshake timeout|"
    r"manifest unknown|unable to pull|not found: manifest|Head \"https://|"
    r"Failed to fetch|Could not connect|Connection timed out|"
    r"Get \"https?://|lookup [\w.-]+",
    re.I,
)


def config_path(entry: Path) -> str | None:
    for rel in (".devcontainer/devcontainer.json", ".devcontainer.json"):
        if (entry / rel).is_file():
            return rel
    found = sorted(entry.glob(".devcontainer/*/devcontainer.json"))
    return str(found[0].relative_to(entry)) if found else None


def kind_of(config: dict) -> str:
    if config.get("dockerComposeFile"):
        return "compose"
    if config.get("build") or config.get("dockerFile") or config.get("dockerfile"):
        return "dockerfile"
    if config.get("image"):
        return "image"
    return "none"


def asks(config: dict) -> list[str]:
    """What the config asks for that the issue's survey found yolo stopping on."""
    out = []
    if config.get("features"):
        out.append("Features")
    run_args = " ".join(str(a) for a in config.get("runArgs") or [])
    if config.get("capAdd") or "--cap-add" in run_args:
        out.append("capAdd")
    if config.get("securityOpt") or "--security-opt" in run_args:
        out.append("securityOpt")
    if config.get("privileged") or "--privileged" in run_args:
        out.append("privileged")
    if "--gpus" in run_args or "gpu" in (config.get("hostRequirements") or {}):
        out.append("GPU")
    if re.search(r"--net(work)?[= ]host", run_args):
        out.append("host network")
    if config.get("mounts"):
        out.append("mounts")
    ports = [str(p) for p in config.get("forwardPorts") or []]
    if any(":" in p for p in ports):
        out.append("forwardPorts host:port")
    elif ports or config.get("appPort"):
        out.append("ports")
    if config.get("initializeCommand"):
        out.append("initializeCommand")
    return out


def last_lines(text: str, n=3) -> str:
    keep = [line.strip() for line in text.splitlines() if line.strip()]
    keep = [line for line in keep if not line.startswith(("Step ", " ---> ", "--->"))]
    return " / ".join(keep[-n:])


def classify(code, out: str, err: str) -> tuple[str, str]:
    text = err + "\n" + out
    if code is None:
        return "failed", "timed out"
    if code == 0:
        return "started", ""
    why = compat.last_error(text)
    if code == 77:
        return "policy", why
    if "docker-compose cannot read the Compose files" in text:
        # Compose's own reading (an env file the repository does not commit, a form this
        # docker-compose version rejects): the reference CLI stops there too.
        return "engine", why
    if code == 65:
        return "config", why
    if NETWORK.search(text):
        m = NETWORK.search(text)
        # The line that names the network failure, so the table shows what stopped it.
        line = next((ln for ln in text.splitlines() if m.group(0) in ln), why)
        return "network", line.strip()
    if code in (69, 70):
        return "engine", last_lines(text)
    return "failed", f"exit {code}: {why}"


def run_entry(yolo: Path, entry: Path, rel: str, run_label: str, timeout: int) -> dict:
    repo = entry.name.split("__", 1)[-1]
    scratch = SCRATCH / entry.name
    copy = scratch / repo
    if scratch.exists():
        shutil.rmtree(scratch)
    shutil.copytree(entry, copy, ignore=shutil.ignore_patterns("SOURCES"))
    env = dict(os.environ)
    env.update(
        YOLO_CONFIG_DIR=str(scratch / "yolo-config"),
        YOLO_DATA_DIR=str(scratch / "yolo-data"),
        YOLO_LABELS=run_label,
    )
    base = ["-w", str(copy)]
    if rel not in (".devcontainer/devcontainer.json", ".devcontainer.json"):
        base += ["--config", str(copy / rel)]
    before = compat.all_image_ids()
    t0 = time.monotonic()
    try:
        code, out, err = compat.run([str(yolo), "up", "--accept-config", *base],
                                    timeout=timeout, env=env)
        status, why = classify(code, out, err)
        # Paths of the scratch copy, shown relative to the repository.
        why = why.replace(f"{copy}/", "").replace(str(copy), ".")
        return {"status": status, "why": why, "seconds": round(time.monotonic() - t0)}
    finally:
        compat.run([str(yolo), "down", "--remove", "--volumes", *base], timeout=120, env=env)
        compat.cleanup(copy, run_label, before)
        shutil.rmtree(scratch, ignore_errors=True)


def render(rows: list[dict], meta: str) -> str:
    n = len(rows)
    count = {s: sum(1 for r in rows if r["status"] == s)
             for s in ("started", "network", "engine", "policy", "config", "failed")}
    reached = count["started"] + count["network"]
    past = reached + count["engine"]
    kinds = {k: sum(1 for r in rows if r["kind"] == k) for k in ("image", "dockerfile", "compose")}
    features = sum(1 for r in rows if "Features" in r["asks"])
    pct = lambda k: f"{100 * k / n:.0f}%" if n else "-"  # noqa: E731
    out = [
        meta,
        "",
        f"{n} configs ({kinds['image']} image, {kinds['dockerfile']} Dockerfile, "
        f"{kinds['compose']} Compose; {features} with Features), `yolo up` with no flag:",
        "",
        f"- **reached the point where only the network stops them: {reached} of {n} "
        f"({pct(reached)})** — started {count['started']}, stopped by the network "
        f"{count['network']};",
        f"- past yolo's checks but stopped by the engine for another reason: {count['engine']} "
        f"(all past yolo's checks: {past}, {pct(past)});",
        f"- stopped by yolo's policy: {count['policy']}; config rejected: {count['config']}; "
        f"other failures: {count['failed']}.",
        "",
        "| Repository | Kind | Asks for | Outcome | What stopped it |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| [{r['repo']}](https://github.com/{r['repo']}) | {r['kind']} | "
            f"{compat.cell(', '.join(r['asks']) or '-')} | {r['status']} | "
            f"{compat.cell(r['why'] or '', 160)} |"
        )
    return "\n".join(out)


def write_doc(table: str):
    text = DOC.read_text()
    if START not in text:
        raise SystemExit(f"corpus: {DOC} has no {START} marker")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{table}\n{END}{tail}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--yolo", type=Path, help="yolo binary (default: build target/debug/yolo)")
    ap.add_argument("--only", action="append", default=[],
                    help="run only entries whose folder contains this (repeatable)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per `yolo up`")
    ap.add_argument("--no-doc", action="store_true", help="print the table, do not write it")
    args = ap.parse_args()
    yolo = args.yolo or compat.build_yolo(release=False)
    entries = sorted(p for p in CORPUS.iterdir() if p.is_dir())
    if args.only:
        entries = [e for e in entries if any(o in e.name for o in args.only)]
    run_label = f"{compat.LABEL}={uuid.uuid4().hex[:12]}"
    compat.sweep_leftovers()
    rows = []
    for entry in entries:
        rel = config_path(entry)
        repo = entry.name.replace("__", "/", 1)
        config = {}
        if rel:
            try:
                config = compat.jsonc((entry / rel).read_text())
            except ValueError:
                config = {}
        row = {"repo": repo, "kind": kind_of(config), "asks": asks(config)}
        if not rel:
            row.update(status="config", why="no devcontainer.json")
        else:
            row.update(run_entry(yolo, entry, rel, run_label, args.timeout))
        print(f"corpus: {repo}: {row['status']} {row['why'][:160]}", flush=True)
        rows.append(row)
    _, version, _ = compat.run([str(yolo), "--version"])
    _, engine, _ = compat.docker("version", "--format", "{{.Server.Version}}")
    meta = (f"Run {dt.date.today().isoformat()} with {version.strip()}, Docker Engine "
            f"{engine.strip()}, offline (no registry reachable), by `scripts/corpus.py`.")
    table = render(rows, meta)
    if args.no_doc or args.only:
        print(table)
    else:
        write_doc(table)
        print(f"corpus: wrote the table into {DOC}")


if __name__ == "__main__":
    main()
