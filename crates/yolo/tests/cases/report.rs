//! `yolo report`: a real session drawn as HTML and opened in a real browser (Debian's
//! `chromium`, headless).

use crate::support::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use yolo_protocol::event::{Event, EventKind};

#[test]
fn report_draws_a_real_session_and_a_browser_shows_it() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let (_, up) = t.up(&[]);
    let session = up["session"].as_str().unwrap().to_string();
    t.yolo(&[
        "exec",
        "--",
        "sh",
        "-c",
        "echo '<script>alert(1)</script>' > .envrc; getent hosts nope.denied.test; true",
    ])
    .ok();
    // The guard writes the refused name (possibly folded a moment later).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !t
        .events()
        .iter()
        .any(|e| e["kind"] == "dns" && e["name"] == "nope.denied.test")
    {
        assert!(Instant::now() < deadline, "no dns event: {:#?}", t.events());
        std::thread::sleep(Duration::from_millis(200));
    }
    stand_in_for_the_supervisor_and_the_watcher(&t.data_dir, &session);
    t.yolo(&["down"]).ok();

    let default = t.yolo(&["report"]).ok();
    let page = t
        .data_dir
        .join("sessions")
        .join(&session)
        .join("report.html");
    assert_eq!(default.stdout(), format!("{}\n", page.display()));
    let chosen = t.root().join("chosen.html");
    t.yolo(&["report", &session, "-o", chosen.to_str().unwrap()])
        .ok()
        .assert_stdout(&format!("{}\n", chosen.display()));
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html, std::fs::read_to_string(&chosen).unwrap());
    // What the agent wrote is text, never markup.
    assert!(!html.contains("<script"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));

    // `yolo audit` joins each exit into its exec.
    let execs = t
        .yolo(&["audit", "--session", &session, "--kind", "exec", "--json"])
        .ok()
        .stdout();
    let execs: Vec<serde_json::Value> = execs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(execs.len(), 3, "{execs:#?}");
    assert_eq!(execs[0]["exit_code"], 0);
    assert_eq!(execs[1]["exit_code"], 6);
    assert_eq!(execs[1]["duration_ms"], 40);
    assert!(execs[2].get("exit_code").is_none(), "{:#?}", execs[2]);
    t.yolo(&["audit", "--session", &session])
        .ok()
        .assert_stdout_lacks("exec_exit");

    let Some(dom) = in_a_browser(t.root(), &page) else {
        return;
    };
    for id in ["summary", "timeline", "processes", "network", "files"] {
        assert!(
            dom.contains(&format!("<section id=\"{id}\">")),
            "{id}:\n{dom}"
        );
    }
    assert!(!dom.contains("<script"), "{dom}");
    assert!(
        dom.contains("<dd><code>debian:bookworm-slim</code></dd>"),
        "{dom}"
    );
    // The process tree: curl under sh, the exit codes.
    assert!(dom.contains("id=\"exec-1\" data-depth=\"0\""), "{dom}");
    assert!(dom.contains("id=\"exec-2\" data-depth=\"1\""), "{dom}");
    assert!(
        dom.contains("curl &lt;script&gt;x&lt;/script&gt;.test"),
        "{dom}"
    );
    // The network: the refused name, from the guard.
    let refused = section(&dom, "id=\"network-refused\"");
    assert!(refused.contains("nope.denied.test"), "{refused}");
    // Files: the sensitive one first, the folded one with its count, the watched file.
    let files = section(&dom, "id=\"files-changed\"");
    let envrc = files.find(".envrc").expect(".envrc");
    let src = files.find("src/").expect("src/");
    assert!(envrc < src, "{files}");
    assert!(files.contains("<td>modified</td><td>12</td>"), "{files}");
    assert!(section(&dom, "id=\"files-watched\"").contains(".envrc"));
}

/// Stands in for the guard's exec supervisor and file watcher only until they land: their
/// lines, serialized from the real event types, appended where the guard will write them.
fn stand_in_for_the_supervisor_and_the_watcher(data: &Path, session: &str) {
    let exec = |id, pid, ppid, argv: &[&str]| EventKind::Exec {
        id,
        pid,
        ppid,
        uid: 1000,
        gid: 1000,
        path: format!("/usr/bin/{}", argv[0]),
        exe: Some(format!("/usr/bin/{}", argv[0])),
        argv: argv.iter().map(|a| a.to_string()).collect(),
        cwd: "/workspace".into(),
        result: "ok".into(),
        argv_rewritten: false,
        truncated: false,
        argc: None,
        exit_code: None,
        duration_ms: None,
    };
    let exit = |id, pid, exit_code, duration_ms| EventKind::ExecExit {
        id,
        pid,
        exit_code,
        signal: None,
        duration_ms,
    };
    let file = |path: &str, sensitive, count| EventKind::File {
        path: path.into(),
        change: "modified".into(),
        from: None,
        size: Some(40),
        sensitive,
        count,
        first: None,
        last: None,
    };
    let append = |name: String, kinds: Vec<EventKind>| {
        use std::io::Write;
        let path = data.join("network").join(name);
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for kind in kinds {
            f.write_all(&Event::now(session, kind).to_line()).unwrap();
        }
    };
    append(
        format!("{session}.exec.jsonl"),
        vec![
            exec(1, 100, 1, &["sh", "-c", "curl x"]),
            exec(2, 101, 100, &["curl", "<script>x</script>.test"]),
            exit(2, 101, 6, 40),
            exit(1, 100, 0, 55),
            exec(3, 102, 1, &["sleep", "1000"]),
        ],
    );
    append(
        format!("{session}.files.jsonl"),
        vec![file("src/", false, Some(12)), file(".envrc", true, None)],
    );
}

/// The page as Debian's chromium loads it (its DOM), after a screenshot shows it drew
/// something; `None` only when the browser is missing and YOLO_SKIP_BROWSER=1 says that is
/// fine (CI installs it and never skips).
fn in_a_browser(dir: &Path, page: &Path) -> Option<String> {
    let Ok(found) = Command::new("chromium").arg("--version").output() else {
        if std::env::var_os("YOLO_SKIP_BROWSER").is_some_and(|v| v == "1") {
            eprintln!("YOLO_SKIP_BROWSER=1: the report is not opened in a browser");
            return None;
        }
        panic!(
            "this test opens the report in Debian's chromium: `apt-get install -y \
             --no-install-recommends chromium` (.ci/run does), or set YOLO_SKIP_BROWSER=1"
        );
    };
    assert!(found.status.success(), "chromium --version: {found:?}");
    let url = format!("file://{}", page.display());
    let browser = |args: &[&str]| {
        let out = Command::new("chromium")
            .args(["--headless", "--no-sandbox", "--disable-gpu"])
            .arg(format!(
                "--user-data-dir={}",
                dir.join("chromium").display()
            ))
            .args(args)
            .arg(&url)
            .output()
            .expect("chromium");
        assert!(out.status.success(), "chromium {args:?}: {out:?}");
        out
    };
    let shot = dir.join("report.png");
    browser(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1280,2000",
    ]);
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // A blank page of that size compresses to a few kilobytes; drawn text does not.
    assert!(
        png.len() > 20_000,
        "a {} byte screenshot: blank?",
        png.len()
    );
    let dom = browser(&["--dump-dom"]);
    Some(String::from_utf8_lossy(&dom.stdout).into_owned())
}

/// `dom` from the element carrying `attr` to the end of its table.
fn section<'a>(dom: &'a str, attr: &str) -> &'a str {
    let start = dom
        .find(attr)
        .unwrap_or_else(|| panic!("no {attr}:\n{dom}"));
    let rest = &dom[start..];
    let end = rest
        .find("</table>")
        .or(rest.find("</p>"))
        .unwrap_or(rest.len());
    &rest[..end]
}

#[test]
fn report_of_an_unknown_or_malformed_session_says_what_to_do() {
    let t = Test::without_docker();
    t.yolo(&["report", "20990101T000000Z-00000000"])
        .fails_with(66)
        .assert_stderr_contains("`yolo audit --list` shows the sessions");
    t.yolo(&["report", "../../etc"]).fails_with(64);
}
