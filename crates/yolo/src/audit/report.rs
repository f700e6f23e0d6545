//! One session drawn as a self-contained HTML page (`yolo report`): a summary, the timeline,
//! the tree of programs the agent ran, what it reached on the network and what it changed in
//! the workspace. Inline CSS, no script and nothing fetched, so the page opens offline and
//! anywhere. Every string in it that the repository or the agent could choose (argv, paths,
//! DNS names, messages) goes through [`esc`].
//!
//! Pure: events in, text out. Reading the log and writing the file is `commands::report`'s.
//! The events come one at a time ([`Page::add`]) and are not kept: the page holds counts and a
//! bounded number of rows per section, and says how many more it does not show, so a session
//! log of a gigabyte draws in a few megabytes (docs/performance.md).

use super::line;
use super::{Event, EventKind};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

/// More timeline rows than this are cut (the JSON of `yolo audit --json` has them all).
const MAX_TIMELINE: usize = 5000;
/// Programs drawn in the tree, rows of the other lists, names counted per network table
/// (past it, further names are counted together), rows drawn per network table.
const MAX_PROGRAMS: usize = 5000;
const MAX_ROWS: usize = 1000;
const MAX_NAMES: usize = 20_000;
const MAX_NAME_ROWS: usize = 1000;
/// Bytes of a watched file's diff drawn.
const MAX_DIFF: usize = 16 << 10;
/// Deeper process trees are drawn at this indentation.
const MAX_INDENT: usize = 30;

const STYLE: &str = "
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.4em 0}td,th{padding:2px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}tr:nth-child(even) td{background:#fafafa}
.time{white-space:nowrap}
code,.mono{font-family:ui-monospace,monospace;font-size:.92em;white-space:pre-wrap;word-break:break-all}
.bad{color:#b00020;font-weight:600}.warn{color:#a05a00}.ok{color:#1b6e1b}.muted{color:#777}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 1em}dt{font-weight:600}dd{margin:0}
";

/// The page for `session`'s `events` (exits already joined, see `reader::Exits`).
#[cfg(test)]
fn render(session: &str, events: &[Event]) -> String {
    let mut page = Page::default();
    for e in events {
        page.add(e.clone());
    }
    page.finish(session)
}

/// A page being drawn: what it needs of the events seen so far, bounded.
#[derive(Default)]
pub(crate) struct Page {
    /// The first `session_start`: its time, workspace, image and network.
    start: Option<(DateTime<Utc>, String, String, String)>,
    /// The last `session_stop`: its time and reason.
    stop: Option<(DateTime<Utc>, String)>,
    /// Occurrences per kind (folded records count their repeats).
    counts: BTreeMap<&'static str, u64>,
    failed_execs: u64,
    events: u64,
    timeline: Vec<Event>,
    programs: Vec<Event>,
    unsupervised: Bounded<Event>,
    allowed: Counted,
    refused: Counted,
    blocked: Counted,
    open: Counted,
    sensitive_files: Bounded<Event>,
    other_files: Bounded<Event>,
    watched: Bounded<Event>,
}

/// The first [`MAX_ROWS`] items, and how many more there were.
struct Bounded<T> {
    kept: Vec<T>,
    more: u64,
}

impl<T> Default for Bounded<T> {
    fn default() -> Self {
        Bounded {
            kept: Vec::new(),
            more: 0,
        }
    }
}

impl<T> Bounded<T> {
    fn push(&mut self, item: T) {
        if self.kept.len() < MAX_ROWS {
            self.kept.push(item);
        } else {
            self.more += 1;
        }
    }
}

/// Occurrences per name, for at most [`MAX_NAMES`] names; the rest counted together.
#[derive(Default)]
struct Counted {
    names: BTreeMap<String, u64>,
    /// Occurrences of names past the cap.
    other_times: u64,
    /// Records of names past the cap (at least that many names).
    other_records: u64,
}

impl Counted {
    fn add(&mut self, name: String, times: u64) {
        if let Some(n) = self.names.get_mut(&name) {
            *n += times;
        } else if self.names.len() < MAX_NAMES {
            self.names.insert(name, times);
        } else {
            self.other_times += times;
            self.other_records += 1;
        }
    }
}

impl Page {
    /// Take `event` into the page (in the log's order).
    pub(crate) fn add(&mut self, event: Event) {
        self.events += 1;
        let times = event.kind.count();
        *self.counts.entry(event.kind.name()).or_default() += times;
        match &event.kind {
            EventKind::SessionStart {
                workspace,
                image,
                network,
                ..
            } if self.start.is_none() => {
                self.start = Some((event.ts, workspace.clone(), image.clone(), network.clone()));
            }
            EventKind::SessionStop { reason } => self.stop = Some((event.ts, reason.clone())),
            EventKind::Exec { result, .. } => {
                if result != "ok" {
                    self.failed_execs += 1;
                }
                if self.programs.len() < MAX_PROGRAMS {
                    self.programs.push(event.clone());
                }
            }
            EventKind::Unsupervised { .. } => self.unsupervised.push(event.clone()),
            EventKind::Dns { name, decision, .. } if decision == "allowed" => {
                self.allowed.add(name.clone(), times)
            }
            EventKind::Dns { name, decision, .. } => {
                let key = if decision == "refused" {
                    name.clone()
                } else {
                    format!("{name} ({decision})")
                };
                self.refused.add(key, times)
            }
            EventKind::Blocked {
                proto,
                dst,
                port,
                name,
                ..
            } => self
                .blocked
                .add(line::destination(proto, dst, *port, name), times),
            EventKind::Connection {
                proto,
                dst,
                port,
                name,
                ..
            } => self
                .open
                .add(line::destination(proto, dst, *port, name), times),
            EventKind::File { sensitive, .. } => {
                if *sensitive {
                    self.sensitive_files.push(event.clone())
                } else {
                    self.other_files.push(event.clone())
                }
            }
            EventKind::WatchedFile { .. } => self.watched.push(event.clone()),
            _ => {}
        }
        if self.timeline.len() < MAX_TIMELINE {
            self.timeline.push(event);
        }
    }

    /// The page.
    pub(crate) fn finish(self, session: &str) -> String {
        let mut html = String::new();
        let _ = write!(
            html,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>yolo session {}</title><style>{STYLE}</style></head><body>\n\
             <h1>yolo session <span id=\"session\" class=\"mono\">{}</span></h1>\n",
            esc(session),
            esc(session)
        );
        self.summary(&mut html);
        self.processes(&mut html);
        self.network(&mut html);
        self.files(&mut html);
        self.timeline(&mut html);
        html.push_str("</body></html>\n");
        html
    }
}

/// `text` safe in HTML text and in a quoted attribute, its control characters made visible.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in crate::visible::escape_controls(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// The line saying how many rows a section does not show, if any.
fn more_not_shown(html: &mut String, more: u64, what: &str) {
    if more > 0 {
        let _ = writeln!(
            html,
            "<p class=\"muted more\">{more} more {what} not shown; <code>yolo audit</code> shows them all.</p>"
        );
    }
}

fn duration(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m {}s", s / 60, s % 60),
        s => format!("{}h {}m", s / 3600, s % 3600 / 60),
    }
}

/// One exec, for the tree.
struct Proc<'a> {
    event: &'a Event,
    pid: i32,
    ppid: i32,
}

impl Page {
    fn summary(&self, html: &mut String) {
        html.push_str("<section id=\"summary\"><h2>Summary</h2><dl>\n");
        let mut row = |name: &str, value: String| {
            let _ = writeln!(html, "<dt>{name}</dt><dd>{value}</dd>");
        };
        match &self.start {
            Some((ts, workspace, image, network)) => {
                row("Workspace", format!("<code>{}</code>", esc(workspace)));
                row("Image", format!("<code>{}</code>", esc(image)));
                if !network.is_empty() {
                    row("Network", esc(network));
                }
                row("Started", time(*ts));
            }
            None => row(
                "Started",
                "<span class=\"muted\">not in the log</span>".into(),
            ),
        }
        match &self.stop {
            Some((ts, reason)) => {
                row("Stopped", format!("{} ({})", time(*ts), esc(reason)));
                if let Some((started, ..)) = &self.start {
                    row("Duration", duration((*ts - *started).num_seconds()));
                }
            }
            None => row("Stopped", "still running (or not recorded)".into()),
        }
        let count = |kind: &str| self.counts.get(kind).copied().unwrap_or(0);
        row("Commands yolo ran", count("command").to_string());
        row(
            "Programs run",
            match self.failed_execs {
                0 => count("exec").to_string(),
                n => format!(
                    "{} <span class=\"warn\">({n} more execs failed or were refused)</span>",
                    count("exec") - n
                ),
            },
        );
        row("DNS queries", count("dns").to_string());
        row(
            "Connections blocked",
            format!(
                "<span class=\"{}\">{}</span>",
                if count("blocked") > 0 { "bad" } else { "ok" },
                count("blocked")
            ),
        );
        row(
            "Files changed",
            (count("file") + count("watched_file")).to_string(),
        );
        row("Events", self.events.to_string());
        html.push_str("</dl></section>\n");
    }

    fn timeline(&self, html: &mut String) {
        html.push_str(
            "<section id=\"timeline\"><h2>Timeline</h2>\n\
             <table><thead><tr><th>Time</th><th>Kind</th><th>What</th></tr></thead><tbody>\n",
        );
        for e in &self.timeline {
            let _ = writeln!(
                html,
                "<tr class=\"event {kind}\"><td class=\"mono time\">{}</td><td>{kind}</td><td class=\"mono\">{}</td></tr>",
                e.ts.format("%H:%M:%S%.3f"),
                esc(&line::describe(e)),
                kind = e.kind.name()
            );
        }
        html.push_str("</tbody></table>\n");
        let more = self.events - self.timeline.len() as u64;
        if more > 0 {
            let _ = writeln!(
                html,
                "<p class=\"muted\">{more} more events not drawn; <code>yolo audit</code> shows them all.</p>",
            );
        }
        html.push_str("</section>\n");
    }

    fn processes(&self, html: &mut String) {
        let procs: Vec<Proc> = self
            .programs
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Exec { pid, ppid, .. } => Some(Proc {
                    event: e,
                    pid: *pid,
                    ppid: *ppid,
                }),
                _ => None,
            })
            .collect();
        // A program's parent is the latest program before it that ran as its ppid (a pid that
        // exec'd again is the newer program).
        let mut latest: HashMap<i32, usize> = HashMap::new();
        let mut children: Vec<Vec<usize>> = vec![vec![]; procs.len()];
        let mut roots = vec![];
        for (i, p) in procs.iter().enumerate() {
            match latest.get(&p.ppid) {
                Some(&parent) if procs[parent].pid != p.pid => children[parent].push(i),
                _ => roots.push(i),
            }
            latest.insert(p.pid, i);
        }
        html.push_str("<section id=\"processes\"><h2>Programs run</h2>\n");
        if procs.is_empty() {
            html.push_str("<p class=\"muted\">No program recorded by the exec supervisor.</p>\n");
        } else {
            html.push_str(
                "<table><thead><tr><th>Command</th><th>pid</th><th>ppid</th><th>uid</th>\
                 <th>Result</th><th>Exit</th><th>Time</th><th>cwd</th></tr></thead><tbody>\n",
            );
            // Depth first, without recursion: a fork chain the agent makes can be deep.
            let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&r| (r, 0)).collect();
            while let Some((i, depth)) = stack.pop() {
                exec_row(html, &procs[i], depth);
                stack.extend(children[i].iter().rev().map(|&c| (c, depth + 1)));
            }
            html.push_str("</tbody></table>\n");
            let all = self.counts.get("exec").copied().unwrap_or(0);
            more_not_shown(html, all.saturating_sub(procs.len() as u64), "programs");
        }
        if !self.unsupervised.kept.is_empty() {
            html.push_str(
                "<h3 class=\"warn\">Running without the exec filter (their programs are not recorded)</h3>\
                 <ul id=\"unsupervised\">\n",
            );
            for e in &self.unsupervised.kept {
                let _ = writeln!(html, "<li class=\"mono\">{}</li>", esc(&line::describe(e)));
            }
            html.push_str("</ul>\n");
            more_not_shown(html, self.unsupervised.more, "records");
        }
        html.push_str("</section>\n");
    }

    fn network(&self, html: &mut String) {
        html.push_str("<section id=\"network\"><h2>Network</h2>\n");
        for (id, title, counted) in [
            ("network-allowed", "Names resolved (allowed)", &self.allowed),
            ("network-refused", "Names refused", &self.refused),
            ("network-blocked", "Connections blocked", &self.blocked),
            (
                "network-open",
                "Connections let through (--network open)",
                &self.open,
            ),
        ] {
            if counted.names.is_empty() && id == "network-open" {
                continue;
            }
            counted_table(html, id, title, counted);
        }
        html.push_str("</section>\n");
    }

    fn files(&self, html: &mut String) {
        html.push_str("<section id=\"files\"><h2>Files changed</h2>\n");
        // Sensitive first (the host runs or reads them), each group in time order.
        let groups = [&self.sensitive_files, &self.other_files];
        if groups.iter().all(|g| g.kept.is_empty()) {
            html.push_str("<p class=\"muted\">No change recorded by the file watcher.</p>\n");
        } else {
            html.push_str(
                "<table id=\"files-changed\"><thead><tr><th>Path</th><th>Change</th><th>Times</th>\
                 <th>Size</th><th>When</th></tr></thead><tbody>\n",
            );
            for e in groups.iter().flat_map(|g| &g.kept) {
                file_row(html, e);
            }
            html.push_str("</tbody></table>\n");
            more_not_shown(
                html,
                self.sensitive_files.more + self.other_files.more,
                "file records",
            );
        }
        if !self.watched.kept.is_empty() {
            html.push_str(
                "<h3 class=\"bad\">Files the host runs, changed</h3>\
                 <table id=\"files-watched\"><thead><tr><th>Path</th><th>Change</th><th>Diff</th></tr></thead><tbody>\n",
            );
            for e in &self.watched.kept {
                watched_row(html, e);
            }
            html.push_str("</tbody></table>\n");
            more_not_shown(html, self.watched.more, "changes of files the host runs");
        }
        html.push_str("</section>\n");
    }
}

fn exec_row(html: &mut String, p: &Proc, depth: usize) {
    let EventKind::Exec {
        id,
        uid,
        argv,
        cwd,
        result,
        exit_code,
        duration_ms,
        argv_rewritten,
        truncated,
        path,
        exe,
        ..
    } = &p.event.kind
    else {
        return;
    };
    let command = if argv.is_empty() {
        path.clone()
    } else {
        line::shell_words(argv)
    };
    let mut notes = String::new();
    if let Some(exe) = line::exe_shown(argv, exe.as_deref()) {
        let _ = write!(
            notes,
            " <span class=\"warn exe\">(ran <code>{}</code>)</span>",
            esc(exe)
        );
    }
    if *argv_rewritten {
        notes.push_str(" <span class=\"warn\">(argv rewritten before the exec)</span>");
    }
    if *truncated {
        notes.push_str(" <span class=\"muted\">(cut)</span>");
    }
    let result_class = if result == "ok" { "ok" } else { "bad" };
    let exit = match exit_code {
        Some(0) => "<span class=\"ok\">0</span>".to_string(),
        Some(c) => format!("<span class=\"bad\">{c}</span>"),
        None => "<span class=\"muted\">?</span>".to_string(),
    };
    let _ = writeln!(
        html,
        "<tr class=\"exec\" id=\"exec-{id}\" data-depth=\"{depth}\"><td class=\"mono\" style=\"padding-left:{}em\">{}{}{notes}</td>\
         <td>{}</td><td>{}</td><td>{uid}</td><td class=\"{result_class}\">{}</td><td>{exit}</td><td>{}</td><td class=\"mono\">{}</td></tr>",
        0.5 + 1.5 * depth.min(MAX_INDENT) as f64,
        if depth > 0 { "└ " } else { "" },
        esc(&command),
        p.pid,
        p.ppid,
        esc(result),
        duration_ms.map(|d| format!("{d} ms")).unwrap_or_default(),
        esc(cwd)
    );
}

/// A titled table of names with how many times each occurred, most first: the first
/// [`MAX_NAME_ROWS`], and a line for the rest.
fn counted_table(html: &mut String, id: &str, title: &str, counted: &Counted) {
    let map = &counted.names;
    let distinct = if counted.other_records > 0 {
        format!("more than {}", map.len())
    } else {
        map.len().to_string()
    };
    let _ = writeln!(html, "<h3>{title}: {distinct}</h3>");
    if map.is_empty() {
        let _ = writeln!(html, "<p id=\"{id}\" class=\"muted\">none</p>");
        return;
    }
    let mut rows: Vec<_> = map.iter().collect();
    rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let _ = writeln!(
        html,
        "<table id=\"{id}\"><thead><tr><th>What</th><th>Times</th></tr></thead><tbody>"
    );
    for (what, n) in rows.iter().take(MAX_NAME_ROWS) {
        let _ = writeln!(
            html,
            "<tr><td class=\"mono\">{}</td><td>{n}</td></tr>",
            esc(what)
        );
    }
    html.push_str("</tbody></table>\n");
    let hidden: u64 = rows.iter().skip(MAX_NAME_ROWS).map(|(_, n)| **n).sum();
    let names = rows.len().saturating_sub(MAX_NAME_ROWS);
    if names > 0 || counted.other_records > 0 {
        let _ = writeln!(
            html,
            "<p class=\"muted more\">{} more not shown ({} times); <code>yolo audit</code> shows them all.</p>",
            if counted.other_records > 0 {
                format!("{names} names and {} records of further names", counted.other_records)
            } else {
                format!("{names} names")
            },
            hidden + counted.other_times
        );
    }
}

/// A row of the files table.
fn file_row(html: &mut String, e: &Event) {
    let EventKind::File {
        path,
        change,
        from,
        size,
        sensitive,
        ..
    } = &e.kind
    else {
        return;
    };
    let _ = writeln!(
        html,
        "<tr class=\"file{}\"><td class=\"mono\">{}{}{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td></tr>",
        if *sensitive { " sensitive" } else { "" },
        from.as_ref()
            .map(|f| format!("{} → ", esc(f)))
            .unwrap_or_default(),
        esc(path),
        if *sensitive {
            " <span class=\"bad\">(sensitive)</span>"
        } else {
            ""
        },
        esc(change),
        e.kind.count(),
        size.map(|s| s.to_string()).unwrap_or_default(),
        e.ts.format("%H:%M:%S")
    );
}

/// A row of the watched files table; a long diff is cut.
fn watched_row(html: &mut String, e: &Event) {
    let EventKind::WatchedFile {
        path,
        change,
        git,
        diff,
        ..
    } = &e.kind
    else {
        return;
    };
    let mut end = diff.len().min(MAX_DIFF);
    while !diff.is_char_boundary(end) {
        end -= 1;
    }
    let cut = if end < diff.len() {
        format!("\n… ({} more bytes not shown)", diff.len() - end)
    } else {
        String::new()
    };
    let _ = writeln!(
        html,
        "<tr class=\"watched\"><td class=\"mono\">{}{}</td><td>{}</td><td><pre class=\"mono\">{}{cut}</pre></td></tr>",
        esc(path),
        if *git {
            " <span class=\"bad\">(git reads its config through it)</span>"
        } else {
            ""
        },
        esc(change),
        esc(&diff[..end])
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn event(ts: &str, kind: EventKind) -> Event {
        Event {
            ts: at(ts),
            session: "s1".into(),
            phase: None,
            kind,
        }
    }

    fn exec(id: u64, pid: i32, ppid: i32, argv: &[&str], exit_code: Option<i64>) -> EventKind {
        let path = format!("/usr/bin/{}", argv[0]);
        crate::audit::testing::Exec {
            id,
            pid,
            ppid,
            uid: 1000,
            path: &path,
            exe: Some(&path),
            argv,
            exit_code,
            duration_ms: exit_code.map(|_| 5),
            ..Default::default()
        }
        .kind()
    }

    fn dns(name: &str, decision: &str, count: Option<u64>) -> EventKind {
        EventKind::Dns {
            name: name.into(),
            qtype: "A".into(),
            decision: decision.into(),
            answers: vec![],
            rcode: None,
            entry: None,
            sample_of: None,
            count,
            first: None,
            last: None,
        }
    }

    fn file(path: &str, sensitive: bool, count: Option<u64>) -> EventKind {
        EventKind::File {
            path: path.into(),
            change: "modified".into(),
            from: None,
            size: Some(3),
            sensitive,
            links: vec![],
            count,
            first: None,
            last: None,
        }
    }

    fn session() -> Vec<Event> {
        vec![
            event(
                "2026-11-22T10:00:00Z",
                EventKind::SessionStart {
                    workspace: "/home/me/repo".into(),
                    config_file: String::new(),
                    config_hash: String::new(),
                    image: "debian:bookworm-slim".into(),
                    container: "c".into(),
                    limits: serde_json::Value::Null,
                    grants: vec![],
                    network: "firewall".into(),
                    allowlist: vec![],
                    extra_ca: vec![],
                },
            ),
            event(
                "2026-11-22T10:00:01Z",
                exec(1, 100, 50, &["sh", "-c", "x"], Some(0)),
            ),
            event(
                "2026-11-22T10:00:02Z",
                exec(2, 101, 100, &["curl", "<script>alert(1)</script>"], Some(6)),
            ),
            event("2026-11-22T10:00:02Z", exec(3, 102, 50, &["ls"], None)),
            event(
                "2026-11-22T10:00:03Z",
                dns("ok.allowed.test", "allowed", None),
            ),
            event(
                "2026-11-22T10:00:03Z",
                dns(
                    "<img src=x onerror=alert(1)>.denied.test",
                    "refused",
                    Some(40),
                ),
            ),
            event(
                "2026-11-22T10:00:04Z",
                dns("<img src=x onerror=alert(1)>.denied.test", "refused", None),
            ),
            event("2026-11-22T10:00:05Z", file("src/a.rs", false, Some(7))),
            event("2026-11-22T10:00:06Z", file(".envrc", true, None)),
            event(
                "2026-11-22T10:01:30Z",
                EventKind::SessionStop {
                    reason: "down".into(),
                },
            ),
        ]
    }

    #[test]
    fn the_page_has_every_section_and_no_script() {
        let page = render("s1", &session());
        for id in ["summary", "timeline", "processes", "network", "files"] {
            assert!(page.contains(&format!("<section id=\"{id}\">")), "{id}");
        }
        assert!(!page.contains("<script"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(!page.contains("http"), "nothing fetched: {page}");
        assert!(page.contains("<dt>Duration</dt><dd>1m 30s</dd>"), "{page}");
        assert!(page.contains("<dt>Image</dt><dd><code>debian:bookworm-slim</code></dd>"));
    }

    #[test]
    fn agent_strings_are_escaped() {
        let page = render("s1", &session());
        assert!(
            page.contains("curl &lt;script&gt;alert(1)&lt;/script&gt;"),
            "{page}"
        );
        assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;.denied.test"));
        assert_eq!(esc("a\"'&\u{1b}"), "a&quot;&#39;&amp;\\x1b");
    }

    /// A program run from a memfd, or under another program's name, shows what ran; a
    /// newline the agent put in its cwd or argv does not break the row's text.
    #[test]
    fn the_binary_that_ran_is_shown_and_newlines_are_escaped() {
        let mut kind = exec(1, 100, 50, &["/usr/bin/true"], Some(0));
        if let EventKind::Exec { exe, cwd, .. } = &mut kind {
            *exe = Some("/memfd:x (deleted)".into());
            *cwd = "/w\n12:00:00.000 exec pid=1 uid=0 in /: true".into();
        }
        let page = render("s1", &[event("2026-11-22T10:00:01Z", kind)]);
        assert!(
            page.contains("(ran <code>/memfd:x (deleted)</code>)"),
            "{page}"
        );
        assert!(
            page.contains("/w\\n12:00:00.000 exec pid=1") && !page.contains("/w\n"),
            "{page}"
        );
        // Named by argv[0]: nothing more.
        let page = render("s1", &session());
        assert!(!page.contains("(ran "), "{page}");
    }

    #[test]
    fn children_are_drawn_under_their_parent() {
        let page = render("s1", &session());
        let row = |id: u64| page.find(&format!("id=\"exec-{id}\"")).unwrap();
        assert!(row(1) < row(2) && row(2) < row(3));
        assert!(page.contains("id=\"exec-2\" data-depth=\"1\""));
        assert!(page.contains("id=\"exec-3\" data-depth=\"0\""));
        assert!(
            page.contains("<td><span class=\"bad\">6</span></td>"),
            "{page}"
        );
    }

    #[test]
    fn the_network_counts_folded_records() {
        let page = render("s1", &session());
        assert!(page.contains(
            "<tr><td class=\"mono\">&lt;img src=x onerror=alert(1)&gt;.denied.test</td><td>41</td></tr>"
        ), "{page}");
        assert!(page.contains("<h3>Names resolved (allowed): 1</h3>"));
    }

    #[test]
    fn sensitive_files_come_first() {
        let page = render("s1", &session());
        let envrc = page.find(".envrc").unwrap();
        let src = page.find("src/a.rs").unwrap();
        assert!(envrc < src);
        assert!(page.contains("<td>modified</td><td>7</td>"), "{page}");
    }

    #[test]
    fn long_sections_keep_a_bounded_number_of_rows_and_say_how_many_more() {
        let mut page = Page::default();
        let n = 30_000u64;
        for i in 0..n {
            page.add(event(
                "2026-11-22T10:00:01Z",
                dns(&format!("n{i}.denied.test"), "refused", None),
            ));
            page.add(event(
                "2026-11-22T10:00:01Z",
                file(&format!("f{i}"), i % 2 == 0, None),
            ));
            page.add(event(
                "2026-11-22T10:00:01Z",
                exec(i, i as i32 + 2, 1, &["true"], Some(0)),
            ));
        }
        // What is kept is bounded whatever the log holds.
        assert_eq!(page.refused.names.len(), MAX_NAMES);
        assert_eq!(page.timeline.len(), MAX_TIMELINE);
        assert_eq!(page.programs.len(), MAX_PROGRAMS);
        let html = page.finish("s1");
        assert!(
            html.contains("<dt>Events</dt><dd>90000</dd>"),
            "counts stay exact"
        );
        assert!(html.contains("<dt>DNS queries</dt><dd>30000</dd>"));
        assert!(html.contains("<h3>Names refused: more than 20000</h3>"));
        assert!(html.contains(
            "19000 names and 10000 records of further names more not shown (29000 times)"
        ));
        assert!(html.contains("25000 more programs not shown"));
        assert!(html.contains("28000 more file records not shown"));
        assert!(html.contains("85000 more events not drawn"));
        // Sensitive changes first, each group cut at its own bound.
        assert!(html.find(">f0 <span").unwrap() < html.find(">f1</td>").unwrap());
        assert!(html.len() < 8 << 20, "{}", html.len());
    }

    #[test]
    fn a_deep_fork_chain_does_not_overflow() {
        let events: Vec<Event> = (0..100_000)
            .map(|i| {
                event(
                    "2026-11-22T10:00:01Z",
                    exec(i as u64, i + 2, i + 1, &["sh"], Some(0)),
                )
            })
            .collect();
        let page = render("s1", &events);
        assert!(page.contains(&format!("data-depth=\"{}\"", MAX_PROGRAMS - 1)));
    }
}
