//! The workspace is the agent's way back to the host: what the host executes from it (git hooks
//! and config, the dev container definition, editor settings) is read-only inside, and root in
//! the agent container cannot write, create, replace or move it aside. Commits keep working.

use crate::support::*;
use std::process::Command;

fn git(t: &Test, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=host",
            "-c",
            "user.email=host@example.invalid",
        ])
        .args(args)
        .current_dir(&t.workspace)
        .output()
        .expect("git on the host");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run `script` as root in the agent container; its exit code.
fn attack(t: &Test, script: &str) -> i32 {
    t.yolo(&["exec", "--", "sh", "-c", script]).code()
}

#[test]
fn root_in_the_agent_cannot_plant_what_the_host_runs_but_can_commit() {
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        "FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*\n",
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.user_config(&mirror_for_builds());
    t.file(".envrc", "export A=1\n");
    git(&t, &["init", "-q"]);
    git(&t, &["add", "-A"]);
    git(&t, &["commit", "-q", "-m", "host"]);
    let config_before = std::fs::read(t.workspace.join(".git/config")).unwrap();
    let devcontainer_before =
        std::fs::read(t.workspace.join(".devcontainer/devcontainer.json")).unwrap();
    t.up(&[]);
    assert_eq!(attack(&t, "id -u"), 0, "the attacks run as root");

    for (what, script) in [
        ("a git hook", "echo 'touch /tmp/pwned' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit"),
        ("core.fsmonitor", "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config"),
        ("git config --local", "git -c safe.directory='*' config --local core.hooksPath .githooks"),
        ("a replaced .git/config", "cp .git/config /tmp/c && echo '[core] sshCommand = x' >> /tmp/c && mv /tmp/c .git/config"),
        ("info/attributes", "mkdir -p .git/info && echo '* filter=x' > .git/info/attributes"),
        ("a moved .git", "mv .git .git-aside"),
        ("a removed hooks folder", "rm -rf .git/hooks"),
        ("the dev container config", "echo '{}' > .devcontainer/devcontainer.json"),
        ("a moved .devcontainer", "mv .devcontainer /tmp/dc"),
        ("a VS Code task", "mkdir -p .vscode && echo '{}' > .vscode/tasks.json"),
        ("a JetBrains setting", "echo x > .idea/workspace.xml"),
    ] {
        assert_ne!(attack(&t, script), 0, "root wrote {what}");
    }

    // Nothing reached the host.
    assert!(!t.workspace.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read(t.workspace.join(".git/config")).unwrap(),
        config_before
    );
    assert!(!t.workspace.join(".git/info/attributes").exists());
    assert!(!t.workspace.join(".git-aside").exists());
    assert_eq!(
        std::fs::read(t.workspace.join(".devcontainer/devcontainer.json")).unwrap(),
        devcontainer_before
    );
    for folder in [".vscode", ".idea"] {
        let entries = std::fs::read_dir(t.workspace.join(folder)).unwrap().count();
        assert_eq!(entries, 0, "{folder} stays the empty folder yolo made");
    }

    // What the agent may edit stays writable, and commits from inside land in the repository.
    assert_eq!(attack(&t, "echo 'export B=2' >> .envrc"), 0);
    assert_eq!(
        attack(
            &t,
            "echo work > work.txt && git -c safe.directory='*' -c user.name=agent -c user.email=agent@example.invalid add work.txt && git -c safe.directory='*' -c user.name=agent -c user.email=agent@example.invalid commit -q -m inside"
        ),
        0,
        "a commit from inside"
    );
    assert!(git(&t, &["log", "--format=%s"]).starts_with("inside\n"));
}

#[test]
fn a_workspace_holding_yolos_own_config_is_refused() {
    let mut t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let inside = t.workspace.join(".config/yolo");
    std::fs::create_dir_all(&inside).unwrap();
    t.env("YOLO_CONFIG_DIR", inside.to_str().unwrap());
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("contains yolo's config folder");
    assert!(t.containers().is_empty());
}

#[test]
fn a_same_size_edit_of_a_large_config_file_needs_approval() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let big = "a".repeat(300 * 1024);
    t.file(".devcontainer/data.txt", &big);
    t.up(&[]);
    let mut edited = big.into_bytes();
    edited[1000] = b'b';
    std::fs::write(t.workspace.join(".devcontainer/data.txt"), &edited).unwrap();
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("changed since you last approved it")
        .assert_stderr_contains("sha256");
    t.yolo(&["up", "--accept-config"]).ok();
}

#[test]
fn control_characters_in_a_changed_config_are_shown_not_obeyed() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    // A comment that would erase the line and redraw it as something harmless, and an OSC 52
    // clipboard write.
    t.devcontainer(
        "{\"image\": \"debian:bookworm-slim\", // \x1b[2K\x1b[1G\"harmless\": true \x1b]52;c;ZXZpbA==\x07\n\"customizations\": {\"yolo\": {\"firewall\": {\"allow\": [\"0.0.0.0/1\"]}}}}",
    );
    let run = t.yolo(&["up"]).fails_with(77);
    let stderr = run.stderr();
    assert!(
        !stderr.contains('\x1b') && !stderr.contains('\x07'),
        "{stderr:?}"
    );
    run.assert_stderr_contains("\\x1b[2K\\x1b[1G")
        .assert_stderr_contains("\\x1b]52;c;ZXZpbA==\\x07")
        .assert_stderr_contains("0.0.0.0/1");
}

#[test]
fn vs_code_finds_the_agent_and_never_the_guard() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let (_, out) = t.up(&[]);
    let agent = out["container"]["id"].as_str().unwrap();
    // The reference CLI and VS Code look a folder's container up by this label: a guard found
    // this way would get the repository's hooks run in it, with NET_ADMIN.
    let workspace = t.workspace.canonicalize().unwrap().display().to_string();
    let found = docker(&[
        "ps",
        "-aq",
        "--no-trunc",
        "--filter",
        &format!("label=devcontainer.local_folder={workspace}"),
    ]);
    assert_eq!(found.lines().collect::<Vec<_>>(), [agent]);
    assert_eq!(
        t.containers().len(),
        2,
        "the guard is there, unlabelled for VS Code"
    );
    // yolo still finds both: a second up reuses them.
    let (_, again) = t.up(&[]);
    assert_eq!(again["action"], "running");
}

#[test]
fn run_keeps_the_network_mode_the_user_chose() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config("[agents.quiet]\ncommand = [\"true\"]\n");
    let (_, first) = t.up(&["--network", "none"]);
    assert_eq!(first["network"]["mode"], "none");
    // A plain `run` must neither turn the network on nor recreate the container.
    t.yolo(&["run", "quiet"])
        .ok()
        .assert_stderr_contains("keeps its network mode none");
    let (_, again) = t.up(&[]);
    assert_eq!(again["network"]["mode"], "none");
    assert_eq!(again["container"]["id"], first["container"]["id"]);
    assert_eq!(again["action"], "running");
    // Asking for another mode switches, as asked.
    let (_, switched) = t.up(&["--network", "firewall"]);
    assert_eq!(switched["network"]["mode"], "firewall");
}

/// The build runs behind the firewall with the `debian` build preset. Where Debian's mirror
/// answers from a private or documentation address (a proxy, as on the test machines), the
/// guard does not open it (DNS rebinding): list the address as a static `[build] allow` entry,
/// as a user behind such a mirror would.
fn mirror_for_builds() -> String {
    use std::net::ToSocketAddrs;
    let addrs: Vec<String> = ("deb.debian.org", 80)
        .to_socket_addrs()
        .map(|a| a.map(|a| format!("\"{}\"", a.ip())).collect())
        .unwrap_or_default();
    format!("[build]\nallow = [{}]\n", addrs.join(", "))
}
