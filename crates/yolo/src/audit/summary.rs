//! The one-screen summary of a run that `yolo run` prints after the agent: what it reached
//! and what it did not, the programs it ran and the files it changed.

use super::{line, reader, Event, EventKind};
use std::collections::BTreeMap;

/// The one-screen summary printed after `yolo run`: what the agent reached and what it did not,
/// the programs it ran and the files it changed.
pub(crate) fn summary(
    session: &str,
    since: chrono::DateTime<chrono::Utc>,
    mark: Option<&str>,
) -> String {
    let mut tail = reader::Tail::new(super::session_files(session));
    summary_of(
        tail.poll().filter(|e| super::filter::last_time(e) >= since),
        mark,
    )
}

/// How many programs a summary names, and how many sensitive files.
const TOP_PROGRAMS: usize = 5;
const TOP_SENSITIVE: usize = 5;

/// The summary of these events (those of the run), its heading with `mark` when there is one
/// (`commands::run::closing_mark`).
fn summary_of(events: impl Iterator<Item = Event>, mark: Option<&str>) -> String {
    let mut programs: BTreeMap<String, u64> = BTreeMap::new();
    let mut files_changed: u64 = 0;
    let mut sensitive: Vec<String> = vec![];
    let mut contacted: BTreeMap<String, u64> = BTreeMap::new();
    let mut refused: BTreeMap<String, u64> = BTreeMap::new();
    let mut blocked: BTreeMap<String, u64> = BTreeMap::new();
    let mut http_refused: BTreeMap<String, u64> = BTreeMap::new();
    // Cumulative per kind: the last record of each kind has the total.
    let mut suppressed: BTreeMap<String, u64> = BTreeMap::new();
    // Every name here is the agent's (it chose what to look up, run and write): escaped where
    // it goes, so that it cannot end a line of the summary and add one.
    use crate::visible::escape_controls;
    for event in events {
        // An aggregated record stands for `count` attempts.
        let n = event.kind.count();
        match event.kind {
            // Past the log's cap: lookups of names under an entry not written one by one.
            EventKind::Dns {
                decision,
                sample_of: Some(entry),
                ..
            } if decision == "allowed" => {
                let key = format!("{entry} (other names, past the log's cap)");
                *contacted.entry(escape_controls(&key)).or_default() += n
            }
            EventKind::Dns { name, decision, .. } if decision == "allowed" => {
                *contacted.entry(escape_controls(&name)).or_default() += n
            }
            EventKind::Dns { name, decision, .. } if decision == "refused" => {
                *refused.entry(escape_controls(&name)).or_default() += n
            }
            EventKind::Blocked {
                proto,
                dst,
                port,
                name,
                ..
            } => {
                let destination = line::destination(&proto, &dst, port, &name);
                *blocked.entry(escape_controls(&destination)).or_default() += n
            }
            EventKind::Http {
                method,
                host,
                path,
                refused: true,
                ..
            } => {
                let request = format!("{method} {host}{path}");
                *http_refused.entry(escape_controls(&request)).or_default() += n
            }
            EventKind::Suppressed { of, count, .. } => {
                let total = suppressed.entry(of).or_default();
                *total = (*total).max(count);
            }
            EventKind::Exec {
                result, argv, exe, ..
            } if result == "ok" => {
                *programs
                    .entry(escape_controls(&program_name(&argv, exe)))
                    .or_default() += 1
            }
            EventKind::File {
                path, sensitive: s, ..
            } => {
                files_changed += n;
                let path = escape_controls(&path);
                if s && !sensitive.contains(&path) {
                    sensitive.push(path);
                }
            }
            _ => {}
        }
    }
    let mut out = match mark {
        Some(mark) => format!("summary of this run (mark {mark}):\n"),
        None => String::from("summary of this run:\n"),
    };
    for (title, map) in [
        ("domains resolved (allowed)", &contacted),
        ("domains refused", &refused),
        ("connections blocked", &blocked),
        ("requests refused (HTTP)", &http_refused),
    ] {
        out.push_str(&format!("  {title}: {}\n", map.len()));
        let mut items: Vec<_> = map.iter().collect();
        items.sort_by(|a, b| b.1.cmp(a.1));
        for (k, n) in items.iter().take(8) {
            out.push_str(&format!("    {k} ({n}x)\n"));
        }
        if items.len() > 8 {
            out.push_str(&format!(
                "    ... and {} more (`yolo audit`)\n",
                items.len() - 8
            ));
        }
    }
    out.push_str(&format!(
        "  programs run: {}\n",
        programs.values().sum::<u64>()
    ));
    let mut top: Vec<_> = programs.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (name, n) in top.iter().take(TOP_PROGRAMS) {
        out.push_str(&format!("    {name} ({n}x)\n"));
    }
    if top.len() > TOP_PROGRAMS {
        out.push_str(&format!(
            "    ... and {} more (`yolo audit --kind exec`)\n",
            top.len() - TOP_PROGRAMS
        ));
    }
    out.push_str(&format!("  files changed: {files_changed}\n"));
    if !sensitive.is_empty() {
        out.push_str(&format!(
            "  sensitive files changed (the host runs or reads them): {}\n",
            sensitive.len()
        ));
        for path in sensitive.iter().take(TOP_SENSITIVE) {
            out.push_str(&format!("    {path}\n"));
        }
        if sensitive.len() > TOP_SENSITIVE {
            out.push_str(&format!(
                "    ... and {} more (`yolo audit --kind file`)\n",
                sensitive.len() - TOP_SENSITIVE
            ));
        }
    }
    if !suppressed.is_empty() {
        let counts: Vec<String> = suppressed
            .iter()
            .map(|(of, n)| format!("{n} {of}"))
            .collect();
        out.push_str(&format!(
            "  WARNING: the session's audit log is full ([audit] max_session_log): not written, only counted: {}\n",
            counts.join(", ")
        ));
    }
    out
}

/// A program's name in the summary: the base name of what it was called (`argv[0]`), or of
/// the binary the kernel ran when the argv is empty; with the binary when `argv[0]` does not
/// name it (`line::exe_shown`: `true (/memfd:x (deleted))`).
fn program_name(argv: &[String], exe: Option<String>) -> String {
    let shown = line::exe_shown(argv, exe.as_deref()).map(str::to_string);
    let called = argv
        .first()
        .filter(|a| !a.is_empty())
        .cloned()
        .or(exe)
        .unwrap_or_else(|| "?".into());
    let base = match called.rsplit_once('/') {
        Some((_, base)) if !base.is_empty() => base.to_string(),
        _ => called,
    };
    match shown {
        Some(exe) if !argv.is_empty() => format!("{base} ({exe})"),
        _ => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(argv: &[&str], exe: &str, result: &str) -> EventKind {
        crate::audit::testing::Exec {
            path: exe,
            exe: Some(exe),
            argv,
            result,
            ..Default::default()
        }
        .kind()
    }

    fn file(path: &str, sensitive: bool, count: Option<u64>) -> EventKind {
        EventKind::File {
            path: path.into(),
            change: "modified".into(),
            from: None,
            size: None,
            sensitive,
            links: vec![],
            count,
            first: None,
            last: None,
        }
    }

    #[test]
    fn the_summary_counts_programs_and_files() {
        let mut kinds = vec![
            exec(&["/usr/bin/git", "status"], "/usr/bin/git", "ok"),
            exec(&["git", "diff"], "/usr/bin/git", "ok"),
            exec(&["sh", "-c", "x"], "/bin/sh", "ok"),
            exec(&[], "/usr/bin/env", "ok"),
            // Failed execs did not run a program.
            exec(&["nope"], "/usr/bin/nope", "ENOENT"),
            file("src/", false, Some(40)),
            file(".envrc", true, None),
            file(".envrc", true, None),
            file("Makefile", true, None),
        ];
        for name in ["a", "b", "c", "d"] {
            kinds.push(exec(&[name], name, "ok"));
        }
        let text = summary_of(kinds.into_iter().map(|k| Event::now("s", k)), None);
        assert_eq!(
            text,
            "summary of this run:
  domains resolved (allowed): 0
  domains refused: 0
  connections blocked: 0
  requests refused (HTTP): 0
  programs run: 8
    git (2x)
    a (1x)
    b (1x)
    c (1x)
    d (1x)
    ... and 2 more (`yolo audit --kind exec`)
  files changed: 43
  sensitive files changed (the host runs or reads them): 2
    .envrc
    Makefile
"
        );
    }

    fn http(path: &str, status: u16, refused: bool, count: Option<u64>) -> EventKind {
        EventKind::Http {
            method: "POST".into(),
            host: "api.example.test".into(),
            path: path.into(),
            status,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 1,
            rule: "http.\"api.example.test\".allow".into(),
            credential: None,
            refused,
            count,
            first: None,
            last: None,
        }
    }

    /// Requests the guard's proxy refused are counted (a folded record for all it stands
    /// for); a 403 of the host itself, and forwarded requests, are not.
    #[test]
    fn the_summary_counts_the_requests_the_guard_refused() {
        let kinds = vec![
            http("/v1/files", 403, true, None),
            http("/v1/files", 403, true, Some(3)),
            http("/v1/upload", 403, true, None),
            http("/v1/messages", 200, false, None),
            http("/v1/private", 403, false, None),
        ];
        let text = summary_of(kinds.into_iter().map(|k| Event::now("s", k)), None);
        assert!(
            text.contains(
                "  requests refused (HTTP): 2\n    POST api.example.test/v1/files (4x)\n    POST api.example.test/v1/upload (1x)\n"
            ),
            "{text}"
        );
    }

    /// The names in the summary are the agent's: one with a newline stays on its line.
    #[test]
    fn the_agents_names_cannot_add_a_line_to_the_summary() {
        let forged = "x.test\n  connections blocked: 0\n";
        let kinds = vec![
            EventKind::Dns {
                name: forged.into(),
                qtype: "A".into(),
                decision: "refused".into(),
                answers: vec![],
                rcode: None,
                entry: None,
                sample_of: None,
                count: None,
                first: None,
                last: None,
            },
            exec(&["t\n  files changed: 0"], "/usr/bin/t", "ok"),
            file("a\n  files changed: 0", true, None),
        ];
        let text = summary_of(kinds.into_iter().map(|k| Event::now("s", k)), Some("m"));
        assert!(
            text.starts_with("summary of this run (mark m):\n"),
            "{text}"
        );
        for heading in ["  files changed:", "  connections blocked:"] {
            let lines = text.lines().filter(|l| l.starts_with(heading)).count();
            assert_eq!(lines, 1, "{heading} in\n{text}");
        }
        assert!(
            text.contains("    x.test\\n  connections blocked: 0\\n (1x)"),
            "{text}"
        );
    }

    #[test]
    fn a_program_is_named_by_its_base_name() {
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(program_name(&argv(&["/usr/bin/git"]), None), "git");
        assert_eq!(program_name(&argv(&[]), Some("/bin/ls".into())), "ls");
        assert_eq!(program_name(&argv(&["dir/"]), None), "dir/");
        assert_eq!(program_name(&argv(&[]), None), "?");
        assert_eq!(
            program_name(&argv(&["true"]), Some("/memfd:x (deleted)".into())),
            "true (/memfd:x (deleted))"
        );
        assert_eq!(
            program_name(&argv(&["ls"]), Some("/usr/bin/ls".into())),
            "ls"
        );
    }
}
