//! `yolo report`: a real session drawn as HTML and opened in a real browser (Debian's
//! `chromium`, headless).

use crate::support::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

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
        "echo '<script>alert(1)</script>' > .envrc; getent hosts nope.denied.test; \
         sh -c 'exit 6'; mkdir -p src; for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo $i > src/f$i; done; true",
    ])
    .ok();
    // The guard writes the refused name, the execs and the file changes (each possibly a
    // moment later: folded, debounced).
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let events = t.events();
        let seen = |kind: &str, key: &str, value: &str| {
            events.iter().any(|e| e["kind"] == kind && e[key] == value)
        };
        if seen("dns", "name", "nope.denied.test")
            && events
                .iter()
                .any(|e| e["kind"] == "exec_exit" && e["exit_code"] == 6)
            && seen("file", "path", ".envrc")
        {
            break;
        }
        assert!(Instant::now() < deadline, "events missing: {events:#?}");
        std::thread::sleep(Duration::from_millis(200));
    }
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
    let find = |pred: &dyn Fn(&[serde_json::Value]) -> bool| {
        execs
            .iter()
            .find(|e| pred(e["argv"].as_array().unwrap()))
            .unwrap_or_else(|| panic!("{execs:#?}"))
            .clone()
    };
    let outer = find(&|a| a.len() == 3 && a[2].as_str().unwrap().contains("<script>"));
    let inner = find(&|a| a.len() == 3 && a[2] == "exit 6");
    assert_eq!(outer["exit_code"], 0, "{outer}");
    assert_eq!(inner["exit_code"], 6, "{inner}");
    assert_eq!(inner["ppid"], outer["pid"], "{inner}");
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
    // The process tree: the inner shell one level under the outer one.
    let depth = |e: &serde_json::Value| -> u32 {
        let row = format!("id=\"exec-{}\" data-depth=\"", e["id"]);
        let at = dom.find(&row).unwrap_or_else(|| panic!("{row}:\n{dom}")) + row.len();
        dom[at..].split('"').next().unwrap().parse().unwrap()
    };
    assert_eq!(depth(&inner), depth(&outer) + 1);
    // The network: the refused name, from the guard.
    let refused = section(&dom, "id=\"network-refused\"");
    assert!(refused.contains("nope.denied.test"), "{refused}");
    // Files: the sensitive one first, then the others; the watched file with its diff.
    let files = section(&dom, "id=\"files-changed\"");
    let envrc = files.find(".envrc").expect(".envrc");
    let src = files.find("src/").expect("src/");
    assert!(envrc < src, "{files}");
    assert!(section(&dom, "id=\"files-watched\"").contains(".envrc"));
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

/// `yolo audit` and `yolo report` on a session whose exec log the agent filled (it fills the
/// 1 GiB cap in seconds): they read it line by line and keep bounded memory. Run with a data
/// limit (`RLIMIT_DATA`) of 3/4 of the log's size: a reader that loads the log whole dies of it,
/// as `yolo audit --kind dns` did at 3.3 GB for a 1 GiB log (docs/performance.md).
#[test]
fn audit_and_report_of_a_huge_log_stay_within_a_memory_limit() {
    use std::io::Write;
    let t = Test::without_docker();
    let session = "20260101T000000Z-0000abcd";
    let network = t.data_dir.join("network");
    std::fs::create_dir_all(&network).unwrap();
    // 64 MiB of execs with their exits, and a refused name now and then, as the guard writes
    // them.
    let file =
        |name: String| std::io::BufWriter::new(std::fs::File::create(network.join(name)).unwrap());
    let mut log = file(format!("{session}.exec.jsonl"));
    let mut dns = file(format!("{session}.jsonl"));
    let padding = "x".repeat(200);
    let (mut written, mut id) = (0usize, 0u64);
    while written < 64 << 20 {
        id += 1;
        let ts = format!(
            "2026-01-01T00:00:{:02}.{:06}Z",
            id / 1_000_000 % 60,
            id % 1_000_000
        );
        let pid = id % 30000 + 2;
        let lines = format!(
            "{{\"ts\":\"{ts}\",\"session\":\"{session}\",\"kind\":\"exec\",\"id\":{id},\"pid\":{pid},\"ppid\":1,\"uid\":0,\"gid\":0,\"path\":\"/bin/true\",\"argv\":[\"true\",\"{padding}\"],\"cwd\":\"/w\",\"result\":\"ok\"}}\n\
             {{\"ts\":\"{ts}\",\"session\":\"{session}\",\"kind\":\"exec_exit\",\"id\":{id},\"pid\":{pid},\"exit_code\":{},\"duration_ms\":1}}\n",
            id % 7
        );
        log.write_all(lines.as_bytes()).unwrap();
        written += lines.len();
        if id % 1000 == 0 {
            writeln!(
                dns,
                "{{\"ts\":\"{ts}\",\"session\":\"{session}\",\"kind\":\"dns\",\"name\":\"n{id}.denied.test\",\"qtype\":\"A\",\"decision\":\"refused\"}}"
            )
            .unwrap();
        }
    }
    log.flush().unwrap();
    dns.flush().unwrap();
    let limited = |args: &[&str]| t.yolo_within(48 << 20, args);
    let refused = limited(&["audit", "--session", session, "--kind", "dns"]).ok();
    assert_eq!(refused.stdout().lines().count() as u64, id / 1000);
    refused.assert_stdout_contains("n1000.denied.test");
    // The last exec, out of the exec log, its exit joined.
    let since = format!(
        "2026-01-01T00:00:{:02}.{:06}Z",
        id / 1_000_000 % 60,
        id % 1_000_000
    );
    let last = limited(&[
        "audit",
        "--session",
        session,
        "--kind",
        "exec",
        "--json",
        "--since",
        &since,
    ])
    .ok()
    .stdout();
    let last: serde_json::Value = serde_json::from_str(last.trim())
        .unwrap_or_else(|e| panic!("no exec printed ({e}): {last:?}"));
    assert_eq!(
        (last["id"].clone(), last["exit_code"].clone()),
        (id.into(), (id % 7).into())
    );
    let page = t.root().join("page.html");
    limited(&["report", session, "-o", page.to_str().unwrap()]).ok();
    let html = std::fs::read_to_string(&page).unwrap();
    // Counts stay exact; the rows are bounded, the rest said.
    assert!(
        html.contains(&format!("<dt>Programs run</dt><dd>{id}</dd>")),
        "{}",
        &html[..html.len().min(4000)]
    );
    assert!(html.contains(&format!("{} more programs not shown", id - 5000)));
    // Each exit is joined into its exec (exit codes 0..6 in turn).
    assert!(html.contains("id=\"exec-6\""));
    assert!(html.contains("<td><span class=\"bad\">6</span></td>"));
    assert!(html.len() < 16 << 20, "{}", html.len());
}
