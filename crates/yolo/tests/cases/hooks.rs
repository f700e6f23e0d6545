//! Lifecycle hooks: all three forms, and when each runs.

use crate::support::*;

fn count(t: &Test, file: &str) -> usize {
    let out = t
        .yolo(&[
            "exec",
            "sh",
            "-c",
            &format!("cat /tmp/{file} 2>/dev/null | wc -l"),
        ])
        .ok();
    out.stdout().trim().parse().unwrap()
}

#[test]
fn hooks_run_in_all_forms_once_per_create_per_start_and_per_attach() {
    let t = Test::new();
    t.devcontainer(
        r#"{
        "image": "debian:bookworm-slim",
        "onCreateCommand": "echo created >> /tmp/oncreate",
        "updateContentCommand": ["sh", "-c", "echo u >> /tmp/update"],
        "postCreateCommand": { "a": "echo a >> /tmp/postcreate", "b": ["sh", "-c", "echo b >> /tmp/postcreate"] },
        "postStartCommand": ["sh", "-c", "echo started >> /tmp/poststart"],
        "postAttachCommand": { "one": "echo x >> /tmp/attach" }
    }"#,
    );
    t.up(&[]);
    assert_eq!(count(&t, "oncreate"), 1);
    assert_eq!(count(&t, "update"), 1);
    assert_eq!(
        count(&t, "postcreate"),
        2,
        "both named commands of the object form ran"
    );
    assert_eq!(count(&t, "poststart"), 1);
    assert_eq!(count(&t, "attach"), 1);

    t.up(&[]);
    assert_eq!(
        count(&t, "oncreate"),
        1,
        "create hooks run once per container"
    );
    assert_eq!(
        count(&t, "poststart"),
        1,
        "not restarted: postStart does not run again"
    );
    assert_eq!(count(&t, "attach"), 2, "postAttach runs on every up");

    // /tmp survives a stop in Docker (container filesystem), so the counts carry over.
    t.yolo(&["down"]).ok();
    t.up(&[]);
    assert_eq!(count(&t, "oncreate"), 1);
    assert_eq!(count(&t, "poststart"), 2, "postStart runs on each start");
    assert_eq!(count(&t, "attach"), 3);
}

#[test]
fn hook_output_is_streamed_with_its_name() {
    let t = Test::new();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "postCreateCommand": "echo hello-from-hook"}"#,
    );
    let (run, _) = t.up(&[]);
    run.assert_stderr_contains("[postCreateCommand] hello-from-hook");
}

#[test]
fn a_failing_hook_stops_up_with_its_name_and_exit_code() {
    let t = Test::new();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim",
            "postCreateCommand": {"fine": "true", "broken": "echo oops; exit 7"},
            "postAttachCommand": "touch /tmp/should-not-exist"}"#,
    );
    t.yolo(&["up"])
        .fails_with(70)
        .assert_stderr_contains("[postCreateCommand:broken] oops\n")
        .assert_stderr_contains("yolo: postCreateCommand:broken failed with exit code 7\n");
    let check = t.yolo(&["exec", "test", "-e", "/tmp/should-not-exist"]);
    assert_eq!(check.code(), 1, "later hooks did not run");
}

#[test]
fn remote_env_and_container_env_reach_commands() {
    let t = Test::new();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim",
            "containerEnv": {"BASE": "from-container"},
            "remoteEnv": {"DERIVED": "${containerEnv:BASE}-and-more", "WS": "${containerWorkspaceFolder}"},
            "postCreateCommand": "echo \"$DERIVED\" > /tmp/derived"}"#,
    );
    t.up(&[]);
    let out = t
        .yolo(&["exec", "sh", "-c", "cat /tmp/derived; echo $WS; pwd"])
        .ok();
    assert_eq!(
        out.stdout(),
        "from-container-and-more\n/workspaces/repo\n/workspaces/repo\n"
    );
}

#[test]
fn a_host_command_that_leaves_a_process_behind_does_not_hold_up_up() {
    let t = Test::new();
    // The background sleep keeps the command's output pipe open for as long as it runs.
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "initializeCommand": "sleep 45 & echo started"}"#,
    );
    let clock = std::time::Instant::now();
    t.yolo(&["up", "--trust-host-commands"])
        .ok()
        .assert_stderr_contains("[initializeCommand] started");
    let took = clock.elapsed();
    assert!(
        took < std::time::Duration::from_secs(40),
        "up waited for the background process: {took:?}"
    );
}

#[test]
fn the_users_shell_environment_reaches_hooks_and_exec_unless_the_probe_is_off() {
    let t = Test::new();
    // What a version manager does: its PATH and variables set in the shell's startup file.
    t.file(
        ".devcontainer/Dockerfile",
        "FROM debian:bookworm-slim\nRUN echo 'export FROM_RC=yes PATH=/opt/tool/bin:$PATH' >> /root/.bashrc\n",
    );
    t.devcontainer(
        r#"{"build": {"dockerfile": "Dockerfile"},
            "remoteEnv": {"OWN": "remote"},
            "postCreateCommand": "echo \"$FROM_RC $OWN\" > /tmp/hook-saw"}"#,
    );
    t.up(&[]);
    t.yolo(&["exec", "sh", "-c", "cat /tmp/hook-saw; echo $PATH"])
        .ok()
        .assert_stdout(
            "yes remote\n/opt/tool/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n",
        );
    // The probe is a command like any other: on the session's record.
    assert!(
        t.events()
            .iter()
            .any(|e| e["kind"] == "command" && e["name"] == "userEnvProbe"),
        "{:?}",
        t.events()
    );
    // Off, commands get the container's environment only.
    t.devcontainer(
        r#"{"build": {"dockerfile": "Dockerfile"}, "userEnvProbe": "none",
            "postCreateCommand": "echo \"[$FROM_RC]\" > /tmp/hook-saw"}"#,
    );
    t.yolo(&["up", "--rebuild", "--accept-config"]).ok();
    t.yolo(&["exec", "sh", "-c", "cat /tmp/hook-saw"])
        .ok()
        .assert_stdout("[]\n");
    // With no hook to run, `up` leaves the probe to the first command, which still sees it.
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.yolo(&["up", "--accept-config"]).ok();
    t.yolo(&["exec", "sh", "-c", "echo $FROM_RC"])
        .ok()
        .assert_stdout("yes\n");
    t.yolo(&["exec", "sh", "-c", "echo $FROM_RC"])
        .ok()
        .assert_stdout("yes\n");
}

#[test]
fn a_non_root_user_can_write_the_agents_state_folders() {
    // Docker gives an exec as root the capabilities of the container's process, none for a
    // non-root container user: the setup cannot chown the state volumes, and must still leave
    // them writable for the agent (opencode writes its own at start).
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BASE_IMAGE}\nLABEL yolo.test={}\nRUN useradd --create-home --uid 1000 dev\nUSER dev\n",
            t.id
        ),
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "dev"}"#);
    t.up(&[]);
    t.yolo(&[
        "exec",
        "sh",
        "-c",
        "id -un; mkdir /yolo/state/opencode/repos && touch /yolo/state/claude/ok && echo wrote",
    ])
    .ok()
    .assert_stdout("dev\nwrote\n");
}

/// Every container has no-new-privileges: a hook's sudo cannot become root (the real sudo,
/// allowed without a password), and the failure says why and what to do instead.
#[test]
fn sudo_in_a_hook_cannot_become_root_and_the_error_says_why() {
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        "FROM debian:bookworm-slim\nRUN apt-get update -qq && apt-get install -y -qq --no-install-recommends sudo >/dev/null && rm -rf /var/lib/apt/lists/*\nRUN useradd --create-home --uid 1000 dev && echo 'dev ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/dev\n",
    );
    t.devcontainer(
        r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "dev",
            "postCreateCommand": "sudo id -u > /tmp/became"}"#,
    );
    t.user_config(&mirror_for_builds());
    t.yolo(&["up"])
        .fails_with(70)
        .assert_stderr_contains("postCreateCommand failed")
        .assert_stderr_contains("no-new-privileges");
}

/// A `workspaceFolder` no mount makes: the engine's own words ("chdir to cwd ... set in
/// config.json") are followed by what to fix.
#[test]
fn a_workspace_folder_that_is_not_there_is_named_with_the_fix() {
    let t = Test::new();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "workspaceFolder": "/nowhere/x",
            "postCreateCommand": "true"}"#,
    );
    t.yolo(&["up"])
        .fails_with(70)
        .assert_stderr_contains("its working folder /nowhere/x does not exist there")
        .assert_stderr_contains("\"workspaceFolder\"");
}
