//! Approve as you go (issue 27, item 1): with `--ask`, a lookup of a name outside the
//! allowlist is held while the user is asked; `yolo approvals` lists it from another terminal,
//! `yolo allow --pending ID` lets it through (and can save it), `yolo deny --pending ID`
//! refuses it now, and an unanswered one is refused when its time runs out. Every question and
//! answer is in the log. Root in the agent cannot make the guard hold more than its limits.

use crate::support::https::*;
use crate::support::net::*;
use crate::support::*;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Poll `yolo approvals --json` until a question about `name` is listed; it.
fn wait_question(t: &Test, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let listed: Value =
            serde_json::from_str(&t.yolo(&["approvals", "--json"]).ok().stdout()).unwrap();
        if let Some(q) = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["name"] == name)
        {
            return q.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no question about {name}: {listed}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The agent looks `name` up, waiting up to 35 s for the answer; what `dig +short` printed.
fn held_lookup(t: &Test, name: &str) -> String {
    t.yolo(&["exec", "dig", "+short", "+tries=1", "+time=35", name])
        .stdout()
}

/// A session with `--ask`, questions held `timeout` seconds.
fn ask_session(timeout: u64) -> (Test, Internet) {
    ask_session_with(timeout, "")
}

/// The same, with `extra` at the top of the user config.
fn ask_session_with(timeout: u64, extra: &str) -> (Test, Internet) {
    let t = Test::new();
    let net = Internet::new(&t);
    t.devcontainer(&format!(r#"{{"image": "{AGENT_IMAGE}"}}"#));
    t.user_config(&format!(
        "{}ask_timeout = {timeout}\n",
        net.user_config(extra)
    ));
    let mut flags = net.up_flags(&["*.allowed.test"]);
    flags.push("--ask".into());
    let refs: Vec<&str> = flags.iter().map(String::as_str).collect();
    t.up(&refs);
    (t, net)
}

#[test]
fn a_held_lookup_is_answered_from_another_terminal_and_saved() {
    let (t, net) = ask_session(40);
    std::thread::scope(|scope| {
        let agent = scope.spawn(|| held_lookup(&t, "x.denied.test"));
        let question = wait_question(&t, "x.denied.test");
        assert_eq!(question["what"], "dns");
        let id = question["id"].as_u64().unwrap().to_string();
        t.yolo(&["approvals"])
            .ok()
            .assert_stdout_contains("x.denied.test");
        // The live view has it on top, in an 80x24 screen.
        let screen = t.yolo(&["watch", "--once"]).ok().stdout();
        assert!(
            screen.contains(&format!(
                "{id} dns [denied.test] x.denied.test (A, 1 waiting"
            )),
            "{screen}"
        );
        assert!(screen.contains("network firewall  open"), "{screen}");
        assert_eq!(screen.lines().count(), 24);
        t.yolo(&["allow", "--pending", &id, "--save", "user"])
            .ok()
            .assert_stderr_contains("allowed x.denied.test");
        let answer = agent.join().unwrap();
        assert!(answer.contains(&net.denied.host.ip), "{answer}");
    });
    // The question and its answer are on record, with who answered and how.
    let events = t.events();
    let approval = |decision: &str| {
        events
            .iter()
            .find(|e| e["kind"] == "approval" && e["decision"] == decision)
            .cloned()
    };
    assert_eq!(approval("asked").expect("asked")["name"], "x.denied.test");
    let allowed = approval("allowed").expect("allowed");
    assert!(
        allowed["by"]
            .as_str()
            .unwrap()
            .contains("yolo allow --pending"),
        "{allowed}"
    );
    assert_eq!(allowed["how"], "user config");
    // Saved for the next session, and allowed for this one.
    let config: toml::Value =
        toml::from_str(&std::fs::read_to_string(t.config_dir.join("config.toml")).unwrap())
            .unwrap();
    assert!(config["firewall"]["allow"]
        .as_array()
        .unwrap()
        .contains(&toml::Value::from("x.denied.test")));
    t.yolo(&["firewall"])
        .ok()
        .assert_stdout_contains("x.denied.test");
    // A question answered twice is an error that says why.
    t.yolo(&["deny", "--pending", "1"])
        .fails_with(69)
        .assert_stderr_contains("no question 1 is waiting");
}

#[test]
fn a_denied_or_unanswered_lookup_is_refused() {
    let (t, _net) = ask_session(3);
    std::thread::scope(|scope| {
        let agent = scope.spawn(|| {
            let started = Instant::now();
            let out = t
                .yolo(&["exec", "dig", "+tries=1", "+time=30", "y.denied.test"])
                .stdout();
            (out, started.elapsed())
        });
        let id = wait_question(&t, "y.denied.test")["id"].as_u64().unwrap();
        t.yolo(&["deny", "--pending", &id.to_string()])
            .ok()
            .assert_stderr_contains("refused y.denied.test");
        let (out, took) = agent.join().unwrap();
        assert!(out.contains("status: REFUSED"), "{out}");
        assert!(
            took < Duration::from_secs(3),
            "answered at the deny: {took:?}"
        );
    });
    // Nobody answers: refused when the 3 s run out.
    let started = Instant::now();
    let out = t
        .yolo(&["exec", "dig", "+tries=1", "+time=30", "z.denied.test"])
        .stdout();
    assert!(out.contains("status: REFUSED"), "{out}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(15),
        "{took:?}"
    );
    let events = t.events();
    assert!(events.iter().any(|e| e["kind"] == "approval"
        && e["decision"] == "timed_out"
        && e["name"] == "z.denied.test"));
    assert!(events.iter().any(|e| e["kind"] == "approval"
        && e["decision"] == "denied"
        && e["name"] == "y.denied.test"));
}

#[test]
fn root_in_the_agent_cannot_hold_more_than_the_guards_limits() {
    let (t, net) = ask_session(20);
    // 40 made-up names at once, a wildcard-looking one and an address as a name (an allow of
    // it would be a network entry: the cloud's metadata): at most 32 are held, the rest
    // refused at once; an allowed name still resolves meanwhile.
    let script =
        "for i in $(seq 40); do dig +tries=1 +time=25 n$i.denied.test > /tmp/d$i 2>&1 & done; \
                                    dig +tries=1 +time=5 '*.denied.test' > /tmp/star 2>&1; \
                  dig +tries=1 +time=5 169.254.169.254 >> /tmp/star 2>&1; \
                  sleep 2; dig +short +tries=1 +time=5 www.allowed.test; \
                  grep -l 'status: REFUSED' /tmp/d* | wc -l; grep -c 'status: REFUSED' /tmp/star";
    let out = t.yolo(&["exec", "sh", "-c", script]).ok().stdout();
    let lines: Vec<&str> = out.lines().collect();
    assert!(out.contains(&net.allowed.host.ip), "{out}");
    assert_eq!(lines[lines.len() - 2], "8", "40 names, 32 held: {out}");
    assert_eq!(
        lines[lines.len() - 1],
        "2",
        "a wildcard or an address is never offered: {out}"
    );
    let listed: Value =
        serde_json::from_str(&t.yolo(&["approvals", "--json"]).ok().stdout()).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 32, "{listed}");
}

/// `yolo run` on a pseudo-terminal of 24 rows and 100 columns (`script`), its input a pipe
/// the test types into; what it printed so far is in the returned buffer.
struct OnATerminal {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl OnATerminal {
    fn start(t: &Test, args: &str) -> OnATerminal {
        use std::io::Read;
        use std::process::{Command, Stdio};
        let yolo = env!("CARGO_BIN_EXE_yolo");
        let envs: Vec<(std::ffi::OsString, std::ffi::OsString)> = t
            .command(&[])
            .get_envs()
            .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned())))
            .collect();
        let mut child = Command::new("script")
            .args([
                "-qfec",
                &format!("stty rows 24 cols 100; exec {yolo} {args}"),
                "/dev/null",
            ])
            .current_dir(&t.workspace)
            .envs(envs)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("script (bsdutils)");
        let input = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let output = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = output.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        OnATerminal {
            child,
            input,
            output,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }

    /// The screen as a terminal of 24 rows and 100 columns shows it now (a full-screen program
    /// such as `yolo watch` writes only the cells that changed, so its words are not whole in
    /// the bytes).
    fn screen(&self) -> String {
        let mut parser = vt100::Parser::new(24, 100, 0);
        parser.process(&self.output.lock().unwrap());
        parser.screen().contents()
    }

    /// The screen's last row, as shown now.
    fn last_row(&self) -> String {
        let mut parser = vt100::Parser::new(24, 100, 0);
        parser.process(&self.output.lock().unwrap());
        let row = parser.screen().rows(0, 100).nth(23).unwrap_or_default();
        row
    }

    /// Wait until the screen shows `what`.
    fn wait_on_screen(&self, what: &str) {
        self.wait_until(what, Self::screen);
    }

    /// Wait until the output holds `what`.
    fn wait_for(&self, what: &str) {
        self.wait_until(what, Self::text);
    }

    /// Wait until `what` is in what `seen` reads (30 s at most).
    fn wait_until(&self, what: &str, seen: impl Fn(&Self) -> String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now = seen(self);
            if now.contains(what) {
                return;
            }
            if Instant::now() >= deadline {
                let tail: String = now.escape_debug().to_string();
                let tail = &tail[tail.floor_char_boundary(tail.len().saturating_sub(3000))..];
                panic!("never showed {what:?}; the end of it:\n{tail}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn type_keys(&mut self, keys: &[u8]) {
        use std::io::Write;
        self.input.write_all(keys).unwrap();
        self.input.flush().unwrap();
    }

    fn wait(mut self) -> (Option<i32>, String) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(200));
                return (status.code(), self.text());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("yolo run did not end: {}", self.text().escape_debug());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The prompt of an attached `yolo run`, against an agent that forges it: while its lookup is
/// held, the agent keeps painting a made-up question on the last row (so the row is never
/// quiet and shows the agent's words), after turning origin mode on (which would move a row
/// drawn at the last line into the scrolling region). `Ctrl-]` shows the question yolo holds, whole, and
/// holds the agent's output back so nothing paints over it; an answer key typed with it
/// answers nothing; typed after reading, it answers the question yolo showed.
#[test]
fn a_held_lookup_is_answered_from_the_prompt_of_an_attached_run() {
    let fake = r"\0337\033[24;1H\033[7myolo: the agent looks up safe.allowed.test, refused in 9s · Ctrl-] to answer\033[0m\0338";
    let agent = format!(
        r#"[agents.asker]
command = ["sh", "-c", "printf '\\033[?6h'; dig +short +tries=1 +time=25 x.denied.test > /tmp/dig 2>&1 & (while [ ! -e /tmp/stop ]; do printf '{fake}'; sleep 0.05; done) & read a; echo agent-read-$a; read b; touch /tmp/stop; wait; echo dig-said $(cat /tmp/dig); echo rows-cols $(stty size)"]
"#,
        fake = fake.replace('\\', "\\\\")
    );
    let (t, net) = ask_session_with(30, &agent);
    let mut run = OnATerminal::start(&t, "run asker");
    wait_question(&t, "x.denied.test");
    run.wait_for("the agent looks up x.denied.test");
    assert!(
        run.text().contains("\x1b[1;23r\x1b[24;1H"),
        "drawn on the last row, the agent's output scrolling above it: {}",
        run.text().escape_debug()
    );
    // Keys without Ctrl-] are the agent's while the question is held and the row shown.
    run.type_keys(b"typed\r");
    run.wait_for("agent-read-typed");
    wait_question(&t, "x.denied.test");
    // ATTACK: Ctrl-] and `a` at once, as a user who trusted the forged row would type them:
    // nothing is answered.
    run.type_keys(b"\x1da");
    run.wait_on_screen("(read it, then press the key again)");
    std::thread::sleep(Duration::from_millis(1500));
    let held = wait_question(&t, "x.denied.test");
    assert_eq!(held["what"], "dns");
    // The last row is yolo's question, whole, and stays so: the agent's painting is held back.
    let row = run.last_row();
    assert!(
        row.starts_with("yolo: let the agent look up x.denied.test?"),
        "{row:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(run.last_row(), row, "the agent drew over the question");
    run.type_keys(b"a");
    run.wait_for("allowed x.denied.test for this session");
    run.type_keys(b"\r");
    let (code, text) = run.wait();
    assert_eq!(code, Some(0), "{}", text.escape_debug());
    assert!(
        text.contains(&format!("dig-said {}", net.denied.host.ip)),
        "the lookup was let through: {}",
        text.escape_debug()
    );
    assert!(text.contains("rows-cols 23 100"), "{}", text.escape_debug());
    // The terminal is given back whole: the last scrolling region set is the full screen.
    let (taken, given) = (
        text.rfind("\x1b[1;23r").unwrap(),
        text.rfind("\x1b7\x1b[r").expect("the row given back"),
    );
    assert!(given > taken, "{}", text.escape_debug());
    let events = t.events();
    let decided: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "approval" && e["decision"] != "asked")
        .collect();
    assert_eq!(decided.len(), 1, "{decided:?}");
    let allowed = decided[0];
    assert_eq!(allowed["decision"], "allowed");
    assert_eq!(allowed["name"], "x.denied.test");
    assert!(
        allowed["by"]
            .as_str()
            .unwrap()
            .contains("yolo run's prompt"),
        "{allowed}"
    );
    assert_eq!(allowed["how"], "session");
}

/// A request an inspected host's rules refuse is held too: `yolo approvals` names the rule that
/// would let exactly it through, an allow adds that rule (and `--save user` writes it into the
/// section of the user's config that covers the host), and the held request then reaches the
/// host. Wildcards are never offered: a refused path with `*` is refused at once.
#[test]
fn a_request_its_rules_refuse_is_held_and_answered() {
    const HOST: &str = "files.allowed.test";
    const NEIGHBOUR: &str = "other.allowed.test";
    let t = Test::new();
    let net = Internet::new(&t);
    let ca = TestCa::new("yolo ask test server CA");
    let certs = tempfile::tempdir().unwrap();
    let ca_file = ca.write(certs.path(), "ca.pem");
    let server = HttpsServer::start(&t, &net, "https", &ca, &[HOST, NEIGHBOUR]);
    net.set_answer(HOST, &server.ip);
    net.set_answer(NEIGHBOUR, &server.ip);
    t.devcontainer(&format!(r#"{{"image": "{AGENT_IMAGE}"}}"#));
    t.user_config(&format!(
        "{}ask_timeout = 30\n",
        net.user_config(&format!(
            "extra_ca = [\"{}\"]\n[http.\"*.allowed.test\"]\nallow = [\"GET /**\"]\n",
            ca_file.display()
        ))
    ));
    let mut flags = net.up_flags(&["*.allowed.test"]);
    flags.push("--ask".into());
    let refs: Vec<&str> = flags.iter().map(String::as_str).collect();
    t.up(&refs);
    let post_to = |host: &str, path: &str| {
        t.yolo(&[
            "exec",
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "40",
            "-X",
            "POST",
            &format!("https://{host}{path}"),
        ])
        .stdout()
    };
    let post = |path: &str| post_to(HOST, path);
    let rule = format!("{HOST} POST /v1/upload");
    std::thread::scope(|scope| {
        let agent = scope.spawn(|| post("/v1/upload"));
        let question = wait_question(&t, &rule);
        assert_eq!(question["what"], "http");
        let id = question["id"].as_u64().unwrap().to_string();
        t.yolo(&["approvals"])
            .ok()
            .assert_stdout_contains(&format!("http {rule} (1 waiting"));
        t.yolo(&["allow", "--pending", &id, "--save", "user"])
            .ok()
            .assert_stderr_contains(&format!("allowed {rule}"))
            .assert_stderr_contains("saved POST /v1/upload");
        assert_eq!(agent.join().unwrap(), "200", "the held request went on");
    });
    assert!(
        server.received().iter().any(|r| r["path"] == "/v1/upload"),
        "the host saw it"
    );
    // Allowed for the session: the next one is not asked.
    assert_eq!(post("/v1/upload"), "200");
    // Saved as the host's own rules, a copy of the wildcard's with the new one; the
    // wildcard's are left as they were.
    let config: toml::Value =
        toml::from_str(&std::fs::read_to_string(t.config_dir.join("config.toml")).unwrap())
            .unwrap();
    assert_eq!(
        config["http"][&format!("{HOST}:443")]["allow"],
        toml::Value::from(vec!["GET /**", "POST /v1/upload"])
    );
    assert_eq!(
        config["http"]["*.allowed.test"]["allow"],
        toml::Value::from(vec!["GET /**"])
    );
    // ATTACK: the allow was for one host; another name under the same wildcard is not
    // opened by it (held and asked again, then refused).
    std::thread::scope(|scope| {
        let agent = scope.spawn(|| post_to(NEIGHBOUR, "/v1/upload"));
        let question = wait_question(&t, &format!("{NEIGHBOUR} POST /v1/upload"));
        let id = question["id"].as_u64().unwrap().to_string();
        t.yolo(&["deny", "--pending", &id]).ok();
        assert_eq!(agent.join().unwrap(), "403", "{NEIGHBOUR} was opened too");
    });
    assert!(
        !server
            .received()
            .iter()
            .any(|r| r["path"] == "/v1/upload" && r["host"] == NEIGHBOUR),
        "{NEIGHBOUR} got the upload"
    );
    // ATTACK: a path the rule grammar reads as a wildcard is never offered; refused at once.
    let started = Instant::now();
    assert_eq!(post("/v1/*"), "403");
    assert!(started.elapsed() < Duration::from_secs(10));
    let listed: Value =
        serde_json::from_str(&t.yolo(&["approvals", "--json"]).ok().stdout()).unwrap();
    assert_eq!(listed, serde_json::json!([]), "nothing held: {listed}");
    // A denied one is refused with the proxy's 403.
    std::thread::scope(|scope| {
        let agent = scope.spawn(|| post("/v2/other?leak=secret%20data"));
        let question = wait_question(&t, &format!("{HOST} POST /v2/other"));
        let id = question["id"].as_u64().unwrap().to_string();
        // The query, which the rule does not match on, is shown with it.
        assert_eq!(question["query"], "leak=secret%20data");
        t.yolo(&["approvals"])
            .ok()
            .assert_stdout_contains("POST /v2/other (query ?leak=secret%20data; any query passes)");
        // A request's rule cannot be saved to the repository: said, and nothing answered.
        t.yolo(&["allow", "--pending", &id, "--save", "repo"])
            .fails_with(64)
            .assert_stderr_contains("cannot be saved to devcontainer.json");
        wait_question(&t, &format!("{HOST} POST /v2/other"));
        t.yolo(&["deny", "--pending", &id]).ok();
        assert_eq!(agent.join().unwrap(), "403");
    });
    let events = t.events();
    let decided: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["kind"] == "approval" && e["what"] == "http")
        .map(|e| (e["decision"].as_str().unwrap(), e["name"].as_str().unwrap()))
        .collect();
    assert!(decided.contains(&("allowed", rule.as_str())), "{decided:?}");
    assert!(
        decided.contains(&("denied", &*format!("{HOST} POST /v2/other"))),
        "{decided:?}"
    );
}

#[test]
fn a_held_lookup_is_answered_with_the_keys_of_yolo_watch() {
    let (t, net) = ask_session(40);
    std::thread::scope(|scope| {
        let agent = scope.spawn(|| held_lookup(&t, "x.denied.test"));
        wait_question(&t, "x.denied.test");
        let mut watch = OnATerminal::start(&t, "watch");
        watch.wait_on_screen("x.denied.test");
        // A key right after the list changed is not taken (the agent can time its questions):
        // typed as soon as the question shows, it is refused with a word, unless the machine
        // was so slow that the second had passed (then it is the answer).
        watch.type_keys(b"a");
        let allowed = "allowed x.denied.test for this session";
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = watch.screen();
            if screen.contains("the questions just changed") {
                std::thread::sleep(Duration::from_millis(1200));
                watch.type_keys(b"a");
                break;
            }
            if screen.contains(allowed) {
                break;
            }
            assert!(Instant::now() < deadline, "the key did nothing:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
        watch.wait_on_screen(allowed);
        watch.type_keys(b"q");
        let (code, _) = watch.wait();
        assert_eq!(code, Some(0));
        let answer = agent.join().unwrap();
        assert!(answer.contains(&net.denied.host.ip), "{answer}");
    });
    let events = t.events();
    let allowed = events
        .iter()
        .find(|e| e["kind"] == "approval" && e["decision"] == "allowed")
        .expect("the answer is on record");
    assert!(
        allowed["by"]
            .as_str()
            .unwrap()
            .contains("yolo watch, key a"),
        "{allowed}"
    );
}
