//! Named sessions on a copy (issue 28, item 1): `--copy NAME` gives a session of its own (its
//! own id, containers, guard, state and lock) whose agent works on a copy of the repository in a
//! volume, as on a remote engine, with the local engine; `yolo sync NAME` / `yolo down NAME`
//! bring its work back as the branch `yolo/NAME`, never over the user's branch or files.

use super::remote::{commit_all, git};
use crate::support::*;

/// A repository with one commit and a devcontainer.json.
fn repository() -> Test {
    let t = Test::new();
    t.user_config(
        "[agents.echoer]\ncommand = [\"sh\", \"-c\", \"echo from-run > run.txt; echo done-run\"]\n",
    );
    t.file("README.md", "the repo\n");
    t.file(".gitignore", "ignored/\n");
    t.devcontainer(&format!(r#"{{"image": "{BASE_IMAGE}"}}"#));
    git(&t.workspace, &["init", "-q", "-b", "main"]);
    commit_all(&t);
    t
}

#[test]
fn two_copies_of_one_repository_change_the_same_file_on_their_own_branches() {
    let t = repository();
    let main_before = git(&t.workspace, &["rev-parse", "HEAD"]);
    // Both start at once: each session has its own lock.
    std::thread::scope(|scope| {
        let one = scope.spawn(|| t.yolo(&["up", "--copy", "one"]));
        let two = scope.spawn(|| t.yolo(&["up", "--copy", "two"]));
        one.join().unwrap().ok();
        two.join().unwrap().ok();
    });
    let agents = t.agents();
    assert_eq!(agents.len(), 2, "one agent each: {agents:?}");
    let guards = t.guard_ids();
    assert_eq!(guards.len(), 2, "one guard each: {guards:?}");
    // Each agent's workspace is a volume of its own, not the repository's folder.
    let mut volumes = Vec::new();
    for agent in &agents {
        let mounts = inspect(agent)["Mounts"].clone();
        let workspace = mounts
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["Destination"] == "/workspaces/repo")
            .unwrap_or_else(|| panic!("the workspace mount: {mounts}"))
            .clone();
        assert_eq!(workspace["Type"], "volume", "{mounts}");
        volumes.push(workspace["Name"].as_str().unwrap().to_string());
    }
    assert_ne!(volumes[0], volumes[1]);
    // VS Code and the reference CLI find a folder's container by the `devcontainer.*` labels:
    // a copy's agent does not carry them (it would be taken for the workspace session's).
    for agent in &agents {
        let labels = inspect(agent)["Config"]["Labels"].clone();
        assert_eq!(labels["devcontainer.local_folder"], "", "{labels}");
        assert_eq!(labels["devcontainer.config_file"], "", "{labels}");
    }
    for (name, text) in [("one", "from one"), ("two", "from two")] {
        t.yolo(&[
            "exec",
            "--copy",
            name,
            "sh",
            "-c",
            &format!("echo '{text}' > README.md; echo {name} > {name}.txt"),
        ])
        .ok();
    }
    // The commands that act on a session take it as --session NAME too; each session's
    // record is its own.
    t.yolo(&["exec", "--session", "one", "sh", "-c", "cat one.txt"])
        .ok()
        .assert_stdout_contains("one");
    t.yolo(&["audit", "--session", "two", "--kind", "exec"])
        .ok()
        .assert_stdout_contains("two.txt")
        .assert_stdout_lacks("one.txt");
    // What a sync would bring, the files the host runs first, escaped; no branch moves.
    t.yolo(&[
        "exec",
        "--copy",
        "one",
        "sh",
        "-c",
        "echo 'all:' > Makefile; printf 'a\\033]0;title\\007b\\n' > esc.txt",
    ])
    .ok();
    let diff = t.yolo(&["diff", "one"]).ok().stdout();
    let flagged = diff.find("files your machine runs").expect(&diff);
    let makefile = diff.find("  Makefile").expect(&diff);
    assert!(
        flagged < makefile && makefile < diff.find("README.md").unwrap(),
        "{diff}"
    );
    assert!(diff.contains("+from one"), "{diff}");
    assert!(diff.contains("+a\\x1b]0;title\\x07b"), "{diff}");
    assert!(!diff.contains('\x1b'), "{diff}");
    assert!(!diff.contains("two.txt"), "{diff}");
    assert_eq!(git(&t.workspace, &["branch", "--list", "yolo/*"]), "");
    t.yolo(&["diff"])
        .fails_with(64)
        .assert_stderr_contains("works on the repository itself");
    // A detached run in a named session: its record names the session, `logs --session`
    // finds it, and its work is in that copy only.
    t.yolo(&["run", "-d", "--copy", "two", "echoer"]).ok();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let runs: serde_json::Value =
            serde_json::from_str(&t.yolo(&["ps", "--all", "--json"]).ok().stdout()).unwrap();
        let run = runs
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["copy"] == "two")
            .cloned();
        if run.as_ref().is_some_and(|r| r["state"] == "exited (0)") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{runs}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    t.yolo(&["logs", "--session", "two"])
        .ok()
        .assert_stdout_contains("done-run");
    t.yolo(&["exec", "--copy", "two", "cat", "run.txt"])
        .ok()
        .assert_stdout_contains("from-run");
    t.yolo(&["exec", "--copy", "one", "test", "!", "-e", "run.txt"])
        .ok();
    t.yolo(&["approvals", "--session", "one"])
        .ok()
        .assert_stdout_contains("no question waits");
    // Nothing reached the repository's folder.
    assert_eq!(
        std::fs::read_to_string(t.workspace.join("README.md")).unwrap(),
        "the repo\n"
    );
    assert!(!t.workspace.join("one.txt").exists());
    // `yolo ps --sessions` lists both, running, with what their agents did.
    let listed: serde_json::Value =
        serde_json::from_str(&t.yolo(&["ps", "--sessions", "--json"]).ok().stdout()).unwrap();
    for name in ["one", "two"] {
        let row = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["copy"] == name)
            .unwrap_or_else(|| panic!("{name}: {listed}"));
        assert_eq!(row["state"], "running", "{row}");
        assert_eq!(row["branch"], format!("yolo/{name}"), "{row}");
        assert_eq!(row["synced"], false, "{row}");
        assert!(row["programs"].as_u64().unwrap() >= 1, "{row}");
    }
    // Each copy's work comes back as its own branch.
    t.yolo(&["sync", "one"])
        .ok()
        .assert_stderr_contains("git merge yolo/one");
    t.yolo(&["sync", "--copy", "two"]).ok();
    for (name, text) in [("one", "from one"), ("two", "from two")] {
        let branch = format!("yolo/{name}");
        assert_eq!(
            git(&t.workspace, &["show", &format!("{branch}:README.md")]),
            text
        );
        assert_eq!(
            git(&t.workspace, &["show", &format!("{branch}:{name}.txt")]),
            name
        );
    }
    let files = git(&t.workspace, &["ls-tree", "-r", "--name-only", "yolo/one"]);
    assert!(!files.contains("two.txt"), "{files}");
    // The user's branch and files: untouched.
    assert_eq!(git(&t.workspace, &["rev-parse", "HEAD"]), main_before);
    assert_eq!(git(&t.workspace, &["branch", "--show-current"]), "main");
    // A branch the user moved is not moved again: compare-and-swap.
    let mine = git(
        &t.workspace,
        &[
            "commit-tree",
            "-p",
            "yolo/one",
            "-m",
            "mine",
            "yolo/one^{tree}",
        ],
    );
    git(&t.workspace, &["update-ref", "refs/heads/yolo/one", &mine]);
    t.yolo(&["exec", "--copy", "one", "sh", "-c", "echo more > more.txt"])
        .ok();
    t.yolo(&["sync", "one"])
        .fails_with(75)
        .assert_stderr_contains("then run `yolo sync one` again");
    assert_eq!(git(&t.workspace, &["rev-parse", "yolo/one"]), mine);
    // Nor does `down --remove --volumes` lose the work: it stops there.
    t.yolo(&["down", "one", "--remove", "--volumes"])
        .fails_with(75);
    assert_eq!(t.agents().len(), 2);
    git(&t.workspace, &["branch", "-m", "yolo/one", "yolo/one-mine"]);
    // Down brings the other's last work back, and takes everything of it away.
    t.yolo(&["exec", "--copy", "two", "sh", "-c", "echo last > last.txt"])
        .ok();
    t.yolo(&["down", "two", "--remove", "--volumes"]).ok();
    assert_eq!(git(&t.workspace, &["show", "yolo/two:last.txt"]), "last");
    assert_eq!(t.agents().len(), 1, "one's agent stays");
    // The workspace session starts beside it, on the repository itself, as it always did.
    let (_, up) = t.up(&[]);
    let plain = up["container"]["id"].as_str().unwrap().to_string();
    let bound = inspect(&plain)["Mounts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["Destination"] == "/workspaces/repo" && m["Type"] == "bind");
    assert!(bound, "the workspace session mounts the repository");
    // Every session of the repository goes at once, one's work brought back first.
    t.yolo(&["down", "--all", "--remove", "--volumes"])
        .ok()
        .assert_stderr_contains("session one")
        .assert_stderr_contains("the workspace session");
    assert_eq!(git(&t.workspace, &["show", "yolo/one:more.txt"]), "more");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    // Ended, they are listed with --all only, with their branches synced.
    t.yolo(&["ps", "--sessions"])
        .ok()
        .assert_stderr_contains("no session with containers");
    let ended = t.yolo(&["ps", "--sessions", "--all"]).ok().stdout();
    assert!(ended.contains("yolo/two "), "{ended}");
    assert!(!ended.contains("not synced"), "{ended}");
    assert!(ended.contains("ended"), "{ended}");
    let left = docker(&["volume", "ls", "-q", "--filter", "label=dev.yolo.managed"]);
    for volume in volumes {
        assert!(!left.contains(&volume), "{volume} stays");
    }
    // A session that does not exist is said so, and nothing is made for it.
    t.yolo(&["down", "typo"])
        .fails_with(66)
        .assert_stderr_contains("has no session typo");
    t.yolo(&["kube", "--copy", "one"])
        .fails_with(64)
        .assert_stderr_contains("takes no --copy");
    // A name that cannot be a branch is a usage error.
    t.yolo(&["up", "--copy", "../main"])
        .fails_with(64)
        .assert_stderr_contains("is not a session name");
}

/// `down NAME --remove` keeps the copy's volume when the work could not be brought back (the
/// user moved `yolo/NAME`), and says to run `yolo sync NAME` once that is resolved: that sync,
/// `yolo diff NAME` and `down --all` find the copy without the session's containers, and
/// nothing of the session is left once `down --all --remove --volumes` has brought it back.
#[test]
fn a_copy_kept_after_its_containers_went_is_still_brought_back_and_removed() {
    let t = repository();
    t.yolo(&["up", "--copy", "kept"]).ok();
    t.yolo(&["exec", "--copy", "kept", "sh", "-c", "echo work > work.txt"])
        .ok();
    t.yolo(&["sync", "kept"]).ok();
    let mine = git(
        &t.workspace,
        &[
            "commit-tree",
            "-p",
            "yolo/kept",
            "-m",
            "mine",
            "yolo/kept^{tree}",
        ],
    );
    git(&t.workspace, &["update-ref", "refs/heads/yolo/kept", &mine]);
    t.yolo(&["exec", "--copy", "kept", "sh", "-c", "echo more > more.txt"])
        .ok();
    t.yolo(&["down", "kept", "--remove"])
        .ok()
        .assert_stderr_contains("run `yolo sync kept` once that is resolved");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    let label = format!("label={LABEL}={}", t.id);
    let volumes = || docker(&["volume", "ls", "-q", "--filter", &label]);
    assert!(
        volumes().contains("yolo-workspace-"),
        "the copy's volume went"
    );
    // The copy is read without the session's containers: still refused over the user's branch,
    // then brought back once it is renamed; no helper is left.
    t.yolo(&["sync", "kept"]).fails_with(75);
    assert_eq!(git(&t.workspace, &["rev-parse", "yolo/kept"]), mine);
    git(
        &t.workspace,
        &["branch", "-m", "yolo/kept", "yolo/kept-mine"],
    );
    t.yolo(&["diff", "kept"])
        .ok()
        .assert_stdout_contains("more.txt");
    t.yolo(&["sync", "kept"]).ok();
    assert_eq!(git(&t.workspace, &["show", "yolo/kept:more.txt"]), "more");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    // A yolo killed while it read the copy leaves its helper mounting the volume (as
    // `Engine::volume_helper` makes it: the session's labels, no role).
    let volume = volumes()
        .lines()
        .find(|v| v.starts_with("yolo-workspace-"))
        .unwrap()
        .to_string();
    let id = docker(&[
        "volume",
        "inspect",
        "-f",
        "{{index .Labels \"dev.yolo.id\"}}",
        &volume,
    ]);
    docker(&[
        "create",
        "--name",
        &format!("{volume}-fill-1"),
        "--label",
        &format!("{LABEL}={}", t.id),
        "--label",
        "dev.yolo.managed=true",
        "--label",
        &format!("dev.yolo.id={}", id.trim()),
        "-v",
        &format!("{volume}:/fill"),
        BASE_IMAGE,
    ]);
    // `down --all` finds the session by yolo's record of it, removes the helper left behind
    // and takes its volumes away.
    t.yolo(&["down", "--all", "--remove", "--volumes"])
        .ok()
        .assert_stderr_contains("session kept")
        .assert_stderr_contains(&format!("{volume}-fill-1"));
    assert!(volumes().is_empty(), "{}", volumes());
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

/// A named session's rollback makes its copy anew from the checkpoint: the agent's later work
/// is gone from the copy, the repository's folder is never touched.
#[test]
fn a_rollback_makes_a_copy_anew_from_its_checkpoint() {
    let t = repository();
    // The start's checkpoint is read from the copy's archive as it is made.
    t.yolo(&["up", "--copy", "c"])
        .ok()
        .assert_stderr_lacks("no checkpoint");
    t.yolo(&[
        "exec",
        "--copy",
        "c",
        "sh",
        "-c",
        "echo first > a.txt; echo changed > README.md",
    ])
    .ok();
    t.yolo(&["checkpoint", "c"]).ok();
    t.yolo(&[
        "exec",
        "--copy",
        "c",
        "sh",
        "-c",
        "echo later > b.txt; rm a.txt",
    ])
    .ok();
    let listed = t.yolo(&["checkpoints", "c"]).ok().stdout();
    assert!(
        listed.contains("session start") && listed.contains("yolo checkpoint"),
        "{listed}"
    );
    t.yolo(&["rollback", "c@1", "--yes"])
        .ok()
        .assert_stderr_contains("yolo up --copy c");
    assert!(t.containers().is_empty(), "its containers were removed");
    t.yolo(&["up", "--copy", "c"]).ok();
    let seen = t
        .yolo(&["exec", "--copy", "c", "sh", "-c", "cat a.txt README.md; ls"])
        .ok()
        .stdout();
    assert!(seen.contains("first") && seen.contains("changed"), "{seen}");
    assert!(!seen.contains("b.txt"), "{seen}");
    assert_eq!(
        std::fs::read_to_string(t.workspace.join("README.md")).unwrap(),
        "the repo\n"
    );
    t.yolo(&["down", "--all", "--remove", "--volumes"]).ok();
}

/// The agent container of named session `name`, and the guard whose network it shares.
fn session_containers(t: &Test, name: &str) -> (String, String) {
    let agent = docker(&[
        "ps",
        "-q",
        "--no-trunc",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        &format!("label=dev.yolo.copy={name}"),
        "--filter",
        "label=dev.yolo.role=agent",
    ])
    .trim()
    .to_string();
    assert!(
        !agent.is_empty() && !agent.contains('\n'),
        "{name}: {agent}"
    );
    let mode = inspect(&agent)["HostConfig"]["NetworkMode"]
        .as_str()
        .unwrap()
        .to_string();
    let guard = mode
        .strip_prefix("container:")
        .unwrap_or_else(|| panic!("{name}'s agent is on {mode}, not its guard's network"))
        .to_string();
    (agent, guard)
}

/// Twenty named sessions of one repository started at once (issue 28, item 4; their timing is
/// `bench/sessions.sh`'s): all start, each agent behind a guard of its own, each on a copy of
/// its own; `yolo ps --sessions` lists them all; `down --all --remove --volumes` leaves
/// nothing of them in Docker.
#[test]
fn twenty_sessions_start_at_once_each_behind_its_own_guard() {
    let t = repository();
    let names: Vec<String> = (1..=20).map(|i| format!("s{i}")).collect();
    std::thread::scope(|scope| {
        let ups: Vec<_> = names
            .iter()
            .map(|name| {
                let t = &t;
                scope.spawn(move || t.yolo(&["up", "--copy", name]))
            })
            .collect();
        for up in ups {
            up.join().unwrap().ok();
        }
    });
    let mut guards = std::collections::BTreeSet::new();
    let mut copies = std::collections::BTreeSet::new();
    for name in &names {
        let (agent, guard) = session_containers(&t, name);
        assert_eq!(
            inspect(&guard)["Config"]["Labels"]["dev.yolo.role"],
            "guard",
            "{name}"
        );
        assert!(guards.insert(guard), "{name} shares a guard");
        let mounts = inspect(&agent)["Mounts"].clone();
        let copy = mounts
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["Destination"] == "/workspaces/repo")
            .unwrap_or_else(|| panic!("{name}: {mounts}"))["Name"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(copies.insert(copy), "{name} shares a copy");
    }
    assert_eq!(t.guard_ids().len(), 20);
    let listed: serde_json::Value =
        serde_json::from_str(&t.yolo(&["ps", "--sessions", "--json"]).ok().stdout()).unwrap();
    for name in &names {
        let row = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["copy"] == name.as_str())
            .unwrap_or_else(|| panic!("{name}: {listed}"));
        assert_eq!(row["state"], "running", "{row}");
    }
    // Each agent runs its programs behind its own guard, which records them.
    t.yolo(&["exec", "--copy", "s7", "sh", "-c", "echo seven > seven.txt"])
        .ok();
    t.yolo(&["audit", "--session", "s7", "--kind", "exec"])
        .ok()
        .assert_stdout_contains("seven.txt");
    t.yolo(&["audit", "--session", "s8", "--kind", "exec"])
        .ok()
        .assert_stdout_lacks("seven.txt");
    t.yolo(&["down", "--all", "--remove", "--volumes"]).ok();
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    let left = docker(&[
        "volume",
        "ls",
        "-q",
        "--filter",
        &format!("label={LABEL}={}", t.id),
    ]);
    assert_eq!(left.trim(), "", "volumes left");
}

/// ATTACK: root in one named session's agent, its own firewall open, goes for another session
/// of the same repository: the other guard's address (a service its agent listens on, its DNS
/// server over UDP and TCP), the other session's published port through the gateway, and the
/// other copy's files. Nothing answers and nothing is found; the controls show each probe
/// works where it should.
#[test]
fn root_in_one_session_cannot_reach_another_sessions_guard_dns_ports_or_copy() {
    let t = repository();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    t.devcontainer(&format!(
        r#"{{"image": "{BASE_IMAGE}", "remoteUser": "root", "forwardPorts": [{port}]}}"#
    ));
    git(&t.workspace, &["commit", "-qam", "ports"]);
    t.yolo(&["up", "--copy", "victim"]).ok();
    t.yolo(&["up", "--copy", "attacker", "--network", "open"])
        .ok();
    let (victim_agent, victim_guard) = session_containers(&t, "victim");
    let (attacker_agent, attacker_guard) = session_containers(&t, "attacker");
    assert_ne!(victim_guard, attacker_guard);
    let networks = inspect(&victim_guard)["NetworkSettings"]["Networks"].clone();
    let (network, settings) = networks.as_object().unwrap().iter().next().unwrap();
    let victim_ip = settings["IPAddress"].as_str().unwrap().to_string();
    let gateway = settings["Gateway"].as_str().unwrap().to_string();
    let marker = format!("secret-{}", t.id);
    // The victim's agent listens on a port of its own and on the published one, and keeps a
    // secret in its copy.
    let listen = |p: u16| {
        format!("$s = IO::Socket::INET->new(LocalPort => {p}, Listen => 5, ReuseAddr => 1) or die; while ($c = $s->accept) {{ print $c \"victim hello\\n\"; close $c }}")
    };
    for p in [7070, port] {
        docker(&[
            "exec",
            "-d",
            &victim_agent,
            "perl",
            "-MIO::Socket::INET",
            "-e",
            &listen(p),
        ]);
    }
    t.yolo(&[
        "exec",
        "--copy",
        "victim",
        "sh",
        "-c",
        &format!("echo {marker} > secret.txt"),
    ])
    .ok();
    let tcp = |ip: &str, p: u16| {
        format!("perl -MIO::Socket::INET -e '$c = IO::Socket::INET->new(PeerAddr => \"{ip}\", PeerPort => {p}, Timeout => 3) or exit 7; print <$c>'")
    };
    // A DNS question for example.com over UDP; prints "answered" if anything comes back.
    let udp_dns = |ip: &str| {
        format!("perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => \"{ip}\", PeerPort => 53, Proto => \"udp\") or exit 7; $s->send(pack(\"nnnnnn\", 4242, 256, 1, 0, 0, 0) . \"\\7example\\3com\\0\" . pack(\"nn\", 1, 1)); $r = \"\"; eval {{ local $SIG{{ALRM}} = sub {{ die }}; alarm 3; $s->recv($r, 512); alarm 0 }}; print \"answered\" if length $r'")
    };
    let run = |session: &str, script: &str| -> String {
        let out = t
            .command(&["exec", "--copy", session, "sh", "-c", script])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Controls: the victim reaches its own listener, and the attacker's DNS probe is answered
    // by its own guard.
    assert!(
        run("victim", &tcp("127.0.0.1", 7070)).contains("victim hello"),
        "the control: the victim's listener"
    );
    assert!(
        run("attacker", &udp_dns("127.0.0.1")).contains("answered"),
        "the control: the probe gets its own guard's answer"
    );
    // The attacks.
    for (what, script) in [
        ("the victim's listener", tcp(&victim_ip, 7070)),
        ("the victim's published port", tcp(&victim_ip, port)),
        (
            "the published port through the gateway",
            tcp(&gateway, port),
        ),
        ("the victim's DNS over TCP", tcp(&victim_ip, 53)),
    ] {
        let said = run("attacker", &script);
        assert!(!said.contains("victim hello"), "{what}: {said}");
    }
    assert!(
        !run("attacker", &udp_dns(&victim_ip)).contains("answered"),
        "the victim's DNS answered the attacker"
    );
    // The other copy is nowhere in the attacker's container (the pattern does not hold the
    // marker itself, so the search does not find its own command line).
    let pattern = format!("s(e)cret-{}", t.id);
    let found = run(
        "attacker",
        &format!("grep -rlE '{pattern}' / --exclude-dir=proc --exclude-dir=sys 2>/dev/null; true"),
    );
    assert_eq!(found.trim(), "", "the victim's secret was found");
    assert!(
        run("victim", &format!("grep -rlE '{pattern}' . ")).contains("secret.txt"),
        "the control: the search finds it in the victim's own copy"
    );
    let attacker_mounts = inspect(&attacker_agent)["Mounts"].to_string();
    let victim_copy = inspect(&victim_agent)["Mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["Destination"] == "/workspaces/repo")
        .unwrap()["Name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!attacker_mounts.contains(&victim_copy), "{attacker_mounts}");
    eprintln!("both sessions on {network}; victim at {victim_ip}");
}

/// `up --copy` without a name makes a new session with a generated one, said on stderr and
/// taken by the later commands; a command that acts on a session needs the name.
#[test]
fn a_copy_without_a_name_gets_a_generated_one() {
    let t = repository();
    let up = t.yolo(&["up", "--copy"]).ok();
    let stderr = up.stderr();
    let name = stderr
        .split("new session ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no generated name said: {stderr}"))
        .to_string();
    t.yolo(&[
        "exec",
        "--session",
        &name,
        "sh",
        "-c",
        "echo made > made.txt",
    ])
    .ok();
    t.yolo(&["ps", "--sessions", "--json"])
        .ok()
        .assert_stdout_contains(&name);
    t.yolo(&["exec", "--copy", "--", "true"])
        .fails_with(64)
        .assert_stderr_contains("--copy needs a NAME");
    t.yolo(&["down", &name]).ok();
    assert!(
        git(&t.workspace, &["show", &format!("yolo/{name}:made.txt")]).contains("made"),
        "the work came back on yolo/{name}"
    );
    t.yolo(&["down", "--all", "--remove", "--volumes"]).ok();
}
