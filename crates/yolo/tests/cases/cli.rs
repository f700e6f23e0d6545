//! The surface a new user meets before any container exists: completions, usage errors, and
//! what `yolo init` makes of the repository it is run in. No Docker needed here.

use crate::support::*;

#[test]
fn bash_completions_define_the_function_and_name_the_subcommands() {
    let t = Test::without_docker();
    let script = t.yolo(&["completions", "bash"]).ok().stdout();
    assert!(script.contains("_yolo() {"), "{script}");
    assert!(script.contains("complete -F _yolo"), "{script}");
    for sub in [
        "up",
        "run",
        "exec",
        "shell",
        "down",
        "status",
        "init",
        "doctor",
        "audit",
        "allow",
        "deny",
        "firewall",
        "completions",
    ] {
        assert!(
            script.contains(&format!("yolo__{sub}")) || script.contains(&format!("yolo,{sub})")),
            "{sub} missing from the bash completions"
        );
    }
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        let out = t.yolo(&["completions", shell]).ok().stdout();
        assert!(out.contains("firewall"), "{shell}: {out}");
    }
}

#[test]
fn usage_errors_exit_64_and_list_what_is_valid() {
    let t = Test::without_docker();
    t.yolo(&["audit", "--kind", "dnss"])
        .fails_with(64)
        .assert_stderr_contains("possible values: session_start");
    t.yolo(&["completions", "tcsh"]).fails_with(64);
    t.yolo(&["allow"]).fails_with(64);
    // deny's help promises no more than it does: a port comes out of an entry that lists it.
    let help = t.yolo(&["deny", "--help"]).ok().stdout();
    assert!(
        help.contains("example.com:443 takes that port out of the entries that list it (example.com:80,443 keeps 80). An entry allowed on every port cannot lose one: deny the name, then allow the ports to keep"),
        "{help}"
    );
}

#[test]
fn init_in_a_rust_repository_installs_cargo_and_allows_crates() {
    let t = Test::without_docker();
    t.file(
        "Cargo.toml",
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\n",
    );
    let run = t.yolo(&["init", "--agent", "claude"]).ok();
    assert!(
        run.stderr().starts_with(
            "detected Rust (Cargo.toml): the Dockerfile installs cargo rustc and the firewall allows the crates preset\n"
        ),
        "{}",
        run.stderr()
    );
    let json =
        std::fs::read_to_string(t.workspace.join(".devcontainer/devcontainer.json")).unwrap();
    assert!(
        json.contains(r#""presets": ["npm", "github", "crates"]"#),
        "{json}"
    );
    let dockerfile = std::fs::read_to_string(t.workspace.join(".devcontainer/Dockerfile")).unwrap();
    assert!(
        dockerfile.starts_with("# Dev container for running claude"),
        "{dockerfile}"
    );
    assert!(
        dockerfile.contains("\nFROM debian:bookworm-slim\n"),
        "{dockerfile}"
    );
    assert!(
        dockerfile.contains("apt-get install -y --no-install-recommends ca-certificates curl git less procps sudo nodejs npm cargo rustc \\\n"),
        "{dockerfile}"
    );
}

#[test]
fn init_writes_where_config_says_and_a_missing_workspace_is_nothing_found() {
    let t = Test::without_docker();
    t.yolo(&["init", "--workspace", "/nonexistent/repo"])
        .fails_with(66)
        .assert_stderr_contains("workspace /nonexistent/repo");
    t.yolo(&["init", "--config", ".devcontainer/claude/devcontainer.json"])
        .ok()
        .assert_stderr_contains("wrote .devcontainer/claude/devcontainer.json")
        .assert_stderr_contains("wrote .devcontainer/claude/Dockerfile");
    assert!(t.workspace.join(".devcontainer/claude/Dockerfile").exists());
    assert!(!t.workspace.join(".devcontainer/devcontainer.json").exists());
}
