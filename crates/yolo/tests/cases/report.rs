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
