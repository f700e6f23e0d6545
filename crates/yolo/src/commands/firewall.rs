//! `yolo allow`, `yolo deny` and `yolo firewall`: change or show a running session's allowlist
//! through the guard's control socket, without restarting anything.

use crate::audit::{self, EventKind};
use crate::bring_up::network;
use crate::cli::Target;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::firewall::allowlist::{Allowlist, Pattern, Ports};
use crate::firewall::control::{Request, Response};
use crate::output;
use crate::project::Located;
use crate::session::Session;
use std::collections::BTreeMap;

/// `yolo allow`: the patterns were checked by clap (`values::parse_pattern`), so a typo is a
/// usage error before any Docker work.
pub(crate) async fn allow(target: &Target, patterns: Vec<String>) -> Result<i32> {
    request(
        target,
        &Request::Allow {
            patterns: patterns.clone(),
        },
    )
    .await?;
    eprintln!(
        "yolo: allowed {} (effective now, no restart)",
        patterns.join(" ")
    );
    Ok(0)
}

/// `yolo deny`: the patterns were checked by clap, like `allow`'s.
pub(crate) async fn deny(target: &Target, patterns: Vec<String>) -> Result<i32> {
    let response = request(
        target,
        &Request::Deny {
            patterns: patterns.clone(),
        },
    )
    .await?;
    let remaining =
        Allowlist::parse(response.patterns.as_deref().unwrap_or_default()).unwrap_or_default();
    // Ports asked of an entry open on every port: the grammar lists the ports an entry opens,
    // never the ones it closes, so that entry stays as it is.
    let every_port: Vec<String> = patterns
        .iter()
        .filter_map(|p| match p.parse::<Pattern>().ok()?.ports() {
            Ports::Any => None,
            Ports::Only(closing) => remaining
                .open_on_every_port(p)
                .map(|entry| kept_on_every_port(&entry, closing)),
        })
        .collect();
    if response.removed.is_empty() {
        let why = if every_port.is_empty() {
            format!(
                "none of {} is in the allowlist; `yolo firewall` shows it",
                patterns.join(" ")
            )
        } else {
            format!("nothing denied: {}", every_port.join("; "))
        };
        return Err(Error::Usage(why));
    }
    eprintln!(
        "yolo: denied {}{}",
        response.removed.join(" "),
        if response.revoked.is_empty() {
            String::new()
        } else {
            format!(" (closed {})", response.revoked.join(", "))
        }
    );
    for warning in every_port.iter().cloned().chain(
        patterns
            .iter()
            .filter(|p| remaining.open_on_every_port(p).is_none())
            .filter_map(|p| still_allowed(&remaining, p)),
    ) {
        eprintln!("{} {warning}", console::style("warning:").yellow().bold());
    }
    Ok(0)
}

/// Why `yolo deny NAME:PORTS` left NAME's entry open on every port, and what to run instead.
fn kept_on_every_port(entry: &str, closing: &[u16]) -> String {
    let which = match closing {
        [port] => format!("port {port}"),
        ports => format!("ports {}", join(ports)),
    };
    let example: Vec<u16> = [80, 443, 8080, 8443]
        .into_iter()
        .filter(|p| !closing.contains(p))
        .take(2)
        .collect();
    format!(
        "{entry} is allowed on every port, so {which} cannot be taken away on its own: run \
         `yolo deny {entry}`, then `yolo allow {entry}:PORTS` with the ports you want, e.g. \
         `yolo allow {entry}:{}`",
        join(&example)
    )
}

/// A denied name that another entry (a wildcard, say) still lets through on the denied ports.
fn still_allowed(remaining: &Allowlist, denied: &str) -> Option<String> {
    let Ok(Pattern::Exact { name, ports }) = denied.parse::<Pattern>() else {
        return None;
    };
    let open = match (remaining.lookup(&name)?, &ports) {
        (Ports::Any, _) => "every port".to_string(),
        (Ports::Only(left), Ports::Any) => format!("port {}", join(&left)),
        (Ports::Only(left), Ports::Only(closed)) => {
            let still: Vec<u16> = left.into_iter().filter(|p| closed.contains(p)).collect();
            if still.is_empty() {
                return None;
            }
            format!("port {}", join(&still))
        }
    };
    Some(format!(
        "{name} is still allowed on {open} by another entry; `yolo firewall` lists them"
    ))
}

fn join(ports: &[u16]) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) async fn show(target: &Target, json: bool) -> Result<i32> {
    if json {
        let located = super::locate(target)?;
        let engine = super::engine().await?;
        let guard = running_guard(&engine, &located).await?;
        let response = network::control(&engine, &guard, &Request::Status).await?;
        let state = Session::read(&located.devcontainer_id)?.state;
        let agent = engine.find(&located.owner()).await?.agent;
        let container = agent.map(|c| output::Container::from_found(&c, state.exec.as_ref()));
        output::print(&output::Firewall::from_response(
            container,
            state.session,
            response,
        ));
        return Ok(0);
    }
    let response = request(target, &Request::Status).await?;
    let mode = response.mode.map(crate::firewall::mode_name).unwrap_or("?");
    println!("network: {mode}");
    println!("allowlist:");
    for p in response.patterns.iter().flatten() {
        println!("  {p}");
    }
    println!("open addresses:");
    if response.elements.is_empty() {
        println!("  (none yet: addresses open when an allowed name is resolved)");
    }
    for e in &response.elements {
        let expires = e
            .expires_secs
            .map(|s| format!("expires in {s}s"))
            .unwrap_or_else(|| "static".into());
        println!("  {:<40} {:<12} {expires}", e.element, e.set);
    }
    println!("counters:");
    for (name, c) in &response.counters {
        println!(
            "  {name:<24} {:>10} packets {:>12} bytes",
            c.packets, c.bytes
        );
    }
    Ok(0)
}

async fn request(target: &Target, request: &Request) -> Result<Response> {
    let located = super::locate(target)?;
    let engine = super::engine().await?;
    let guard = running_guard(&engine, &located).await?;
    let response = network::control(&engine, &guard, request).await?;
    record(&located, request);
    Ok(response)
}

/// The host's own record of who asked (the guard records what it did).
fn record(located: &Located, request: &Request) {
    let (action, patterns) = match request {
        Request::Allow { patterns } => ("allow requested", patterns.clone()),
        Request::Deny { patterns } => ("deny requested", patterns.clone()),
        Request::Status => return,
    };
    let Ok(Ok(Some(writer))) = Session::read(&located.devcontainer_id).map(|s| s.record()) else {
        return;
    };
    let _ = writer.write(EventKind::Firewall {
        action: action.into(),
        patterns,
    });
}

async fn running_guard(engine: &Engine, located: &Located) -> Result<String> {
    let found = engine.find(&located.owner()).await?;
    match found.guard {
        Some(g) if g.running => Ok(g.id),
        _ => Err(Error::NotRunning(format!(
            "no running firewall for {}; start the session with `yolo up` (with --network none or no session there is no allowlist to change)",
            located.workspace.display()
        ))),
    }
}

/// The one-screen summary printed after `yolo run`: what the agent reached and what it did not,
/// the programs it ran and the files it changed.
pub(crate) fn summary(
    session: &str,
    since: chrono::DateTime<chrono::Utc>,
    mark: Option<&str>,
) -> String {
    let mut tail = audit::reader::Tail::new(audit::session_files(session));
    summary_of(
        tail.poll().filter(|e| super::audit::last_time(e) >= since),
        mark,
    )
}

/// How many programs a summary names, and how many sensitive files.
const TOP_PROGRAMS: usize = 5;
const TOP_SENSITIVE: usize = 5;

/// The summary of these events (those of the run), its heading with `mark` when there is one
/// (`commands::run::closing_mark`).
fn summary_of(events: impl Iterator<Item = audit::Event>, mark: Option<&str>) -> String {
    let mut programs: BTreeMap<String, u64> = BTreeMap::new();
    let mut files_changed: u64 = 0;
    let mut sensitive: Vec<String> = vec![];
    let mut contacted: BTreeMap<String, u64> = BTreeMap::new();
    let mut refused: BTreeMap<String, u64> = BTreeMap::new();
    let mut blocked: BTreeMap<String, u64> = BTreeMap::new();
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
                let destination = audit::line::destination(&proto, &dst, port, &name);
                *blocked.entry(escape_controls(&destination)).or_default() += n
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
/// name it (`audit::line::exe_shown`: `true (/memfd:x (deleted))`).
fn program_name(argv: &[String], exe: Option<String>) -> String {
    let shown = audit::line::exe_shown(argv, exe.as_deref()).map(str::to_string);
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

    fn list(items: &[&str]) -> Allowlist {
        Allowlist::parse(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn a_port_of_an_entry_open_on_every_port_says_what_to_run() {
        assert_eq!(
            kept_on_every_port("example.test", &[8080]),
            "example.test is allowed on every port, so port 8080 cannot be taken away on its own: \
             run `yolo deny example.test`, then `yolo allow example.test:PORTS` with the ports you \
             want, e.g. `yolo allow example.test:80,443`"
        );
        // The example never offers a port being denied.
        assert!(kept_on_every_port("*.example.test", &[80, 443])
            .contains("so ports 80,443 cannot be taken away on its own: run `yolo deny *.example.test`, then `yolo allow *.example.test:PORTS` with the ports you want, e.g. `yolo allow *.example.test:8080,8443`"));
    }

    #[test]
    fn a_deny_another_entry_undoes_is_pointed_out() {
        let remaining = list(&["api.example.com:80", "*.example.com:443"]);
        assert_eq!(
            still_allowed(&remaining, "api.example.com:443").as_deref(),
            Some("api.example.com is still allowed on port 443 by another entry; `yolo firewall` lists them")
        );
        assert_eq!(still_allowed(&remaining, "api.example.com:8080"), None);
        assert!(
            still_allowed(&remaining, "www.example.com").is_some_and(|w| w.contains("on port 443"))
        );
        assert!(still_allowed(&list(&["*.example.com"]), "a.example.com:22")
            .is_some_and(|w| w.contains("on every port")));
        assert_eq!(still_allowed(&remaining, "other.com"), None);
        assert_eq!(still_allowed(&remaining, "*.example.com"), None);
    }

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
        let text = summary_of(kinds.into_iter().map(|k| audit::Event::now("s", k)), None);
        assert_eq!(
            text,
            "summary of this run:
  domains resolved (allowed): 0
  domains refused: 0
  connections blocked: 0
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
        let text = summary_of(
            kinds.into_iter().map(|k| audit::Event::now("s", k)),
            Some("m"),
        );
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
