//! Every class of user error exits with its documented code (docs/configuration.md, "Exit
//! codes") and says what failed and what to do, per subcommand. The tests with
//! `Test::without_docker` prove the error comes before yolo talks to Docker.

use crate::support::*;

const IMAGE: &str = r#"{"image": "debian:bookworm-slim"}"#;

/// What every command that needs Docker says when `DOCKER_HOST` leads nowhere.
fn docker_down() -> String {
    format!(
        "yolo: docker: connecting to the Docker Engine at {NO_DOCKER} (DOCKER_HOST) failed: Socket not found: {}\n  \
         hint: is Docker running? Start it (e.g. `sudo systemctl start docker`), check DOCKER_HOST, then run `yolo doctor`\n",
        NO_DOCKER.trim_start_matches("unix://")
    )
}

fn no_config(t: &Test) -> String {
    format!(
        "yolo: no devcontainer.json found in {}: looked for .devcontainer/devcontainer.json, .devcontainer.json and .devcontainer/<folder>/devcontainer.json. Create one with `yolo init`, or pass --config <path>\n",
        t.workspace_shown()
    )
}

fn malformed(t: &Test) -> String {
    t.devcontainer("{\n  \"image\": \"debian:bookworm-slim\"\n  \"name\": \"x\"\n}\n");
    format!(
        "yolo: {}/.devcontainer/devcontainer.json:3:3: expected `,` or `}}`; is a comma missing before this?\n",
        t.workspace_shown()
    )
}

fn no_firewall(t: &Test) -> String {
    format!(
        "yolo: no running firewall for {}; start the session with `yolo up` (with --network none or no session there is no allowlist to change)\n",
        t.workspace_shown()
    )
}

/// Docker unreachable (69) and no devcontainer.json (66) for every command that needs both.
#[test]
fn docker_unreachable_is_69_and_no_config_is_66_for_every_workspace_command() {
    let commands: [&[&str]; 8] = [
        &["up"],
        &["run", "claude"],
        &["exec", "true"],
        &["shell"],
        &["down"],
        &["allow", "example.com"],
        &["deny", "example.com"],
        &["firewall"],
    ];
    let t = Test::without_docker();
    for args in commands {
        t.yolo(args).fails_with(66).assert_stderr(&no_config(&t));
    }
    t.devcontainer(IMAGE);
    for args in commands {
        t.yolo(args).fails_with(69).assert_stderr(&docker_down());
    }
    t.yolo(&["status"])
        .fails_with(69)
        .assert_stderr(&docker_down());
}

#[test]
fn up_and_run_refuse_a_malformed_config_with_65() {
    let t = Test::without_docker();
    let message = malformed(&t);
    t.yolo(&["up"]).fails_with(65).assert_stderr(&message);
    t.yolo(&["run", "claude"])
        .fails_with(65)
        .assert_stderr(&message);
}

#[test]
fn run_with_an_unknown_or_no_agent_is_a_usage_error() {
    let t = Test::without_docker();
    t.devcontainer(IMAGE);
    t.yolo(&["run", "nope"]).fails_with(64).assert_stderr(&format!(
        "yolo: unknown agent \"nope\"; known agents: claude, codex, gemini, aider, opencode. To define it, add an [agents.nope] section with a command to {}/config.toml\n",
        t.config_dir.display()
    ));
    t.yolo(&["run"]).fails_with(64).assert_stderr(
        "yolo: name the agent to run, e.g. `yolo run claude` (or set customizations.yolo.agent in devcontainer.json)\n",
    );
}

#[test]
fn init_with_an_unknown_agent_is_64_and_over_an_existing_file_73() {
    let t = Test::without_docker();
    t.yolo(&["init", "--agent", "nope"]).fails_with(64).assert_stderr(
        "yolo: no template for agent \"nope\"; templates exist for claude, codex, gemini, aider, opencode\n",
    );
    assert!(
        !t.workspace.join(".devcontainer").exists(),
        "nothing written"
    );

    t.file(".devcontainer/Dockerfile", "FROM scratch\n");
    t.yolo(&["init"]).fails_with(73).assert_stderr(
        "yolo: ./.devcontainer/Dockerfile already exists; pass --force to overwrite it\n",
    );
    let kept = std::fs::read_to_string(t.workspace.join(".devcontainer/Dockerfile")).unwrap();
    assert_eq!(kept, "FROM scratch\n", "left as it was");
    assert!(!t.workspace.join(".devcontainer/devcontainer.json").exists());
}

/// `allow` and `deny` check their patterns on the command line, like `--allow`: clap's usage
/// error, before Docker (unreachable here) is asked anything.
#[test]
fn allow_and_deny_with_a_bad_pattern_are_usage_errors_before_docker() {
    let t = Test::without_docker();
    t.devcontainer(IMAGE);
    let forms = "accepted forms: example.com, *.example.com, example.com:443, *.example.com:80,443, 1.2.3.4, 10.0.0.0/8, 10.0.0.0/8:443, 2001:db8::1, 2001:db8::/32, [2001:db8::1]:443, [2001:db8::/32]:443";
    for command in ["allow", "deny"] {
        t.yolo(&[command, "bad pattern"])
            .fails_with(64)
            .assert_stderr(&format!(
                "error: invalid value 'bad pattern' for '[PATTERN]...': \"bad pattern\": invalid character ' ' in a domain name; {forms}\n\nFor more information, try '--help'.\n"
            ));
        t.yolo(&[command, "example.com", "*."])
            .fails_with(64)
            .assert_stderr(&format!(
                "error: invalid value '*.' for '[PATTERN]...': \"*.\": empty domain name; {forms}\n\nFor more information, try '--help'.\n"
            ));
    }
}

#[test]
fn audit_of_an_unknown_or_missing_session_is_66() {
    let t = Test::without_docker();
    t.devcontainer(IMAGE);
    t.yolo(&["audit"]).fails_with(66).assert_stderr(&format!(
        "yolo: no sessions yet for {}; start one with `yolo up`\n",
        t.workspace_shown()
    ));
    t.yolo(&["audit", "--session", "nope"])
        .fails_with(66)
        .assert_stderr(
            "yolo: no audit log for session nope; `yolo audit --list` shows the sessions\n",
        );
    t.yolo(&["audit", "--list"]).ok();
}

#[test]
fn a_missing_workspace_folder_is_66() {
    let t = Test::without_docker();
    let gone = t.root().join("gone");
    t.yolo(&["exec", "--workspace", gone.to_str().unwrap(), "true"])
        .fails_with(66)
        .assert_stderr(&format!(
            "yolo: workspace {}: No such file or directory (os error 2) (pass an existing folder with --workspace)\n",
            gone.display()
        ));
}

/// With Docker but nothing of this workspace: commands that act on a running container say
/// so with 69 (the service they need is not there); `down` has nothing to do and succeeds.
#[test]
fn nothing_running_is_69_and_down_with_nothing_to_stop_is_0() {
    let t = Test::new();
    t.devcontainer(IMAGE);
    let no_container = format!(
        "yolo: no yolo container for {}; create it with `yolo up`\n",
        t.workspace_shown()
    );
    t.yolo(&["exec", "true"])
        .fails_with(69)
        .assert_stderr(&no_container);
    t.yolo(&["shell"])
        .fails_with(69)
        .assert_stderr(&no_container);
    for args in [
        &["allow", "example.com"][..],
        &["deny", "example.com"],
        &["firewall"],
    ] {
        t.yolo(args).fails_with(69).assert_stderr(&no_firewall(&t));
    }
    t.yolo(&["down"])
        .ok()
        .assert_stderr(&format!("yolo: no container for {}\n", t.workspace_shown()));
    assert!(t.containers().is_empty());
}

/// One session: deny of what is not listed (64), then the stopped container (69).
#[test]
fn a_running_session_deny_of_an_unlisted_pattern_is_64_and_a_stopped_one_69() {
    let t = Test::new();
    t.devcontainer(IMAGE);
    t.up(&[]);
    t.yolo(&["deny", "not-listed.test"])
        .fails_with(64)
        .assert_stderr(
            "yolo: none of not-listed.test is in the allowlist; `yolo firewall` shows it\n",
        );
    t.yolo(&["firewall"]).ok();

    t.yolo(&["down"]).ok();
    t.yolo(&["exec", "true"])
        .fails_with(69)
        .assert_stderr(&format!(
            "yolo: the container for {} is stopped; start it with `yolo up`\n",
            t.workspace_shown()
        ));
    t.yolo(&["allow", "example.com"])
        .fails_with(69)
        .assert_stderr(&no_firewall(&t));
}
