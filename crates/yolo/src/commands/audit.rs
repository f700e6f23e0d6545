//! `yolo audit`: a plain viewer of a session's events, with `--kind` filters and `--follow`.

use crate::audit::{self, Event, EventKind};
use crate::cli::Target;
use crate::error::{Error, Result};
use crate::state::WorkspaceState;
use std::time::Duration;

pub(crate) async fn execute(
    target: &Target,
    session: Option<String>,
    kinds: Vec<String>,
    follow: bool,
    json: bool,
    list: bool,
) -> Result<i32> {
    if list {
        return list_sessions(target);
    }
    let session = match session {
        Some(s) => s,
        None => latest_session(target)?,
    };
    let files = audit::session_files(&session);
    if !files.iter().any(|f| f.exists()) {
        return Err(Error::NotFound(format!(
            "no audit log for session {session}; `yolo audit --list` shows the sessions"
        )));
    }
    let mut tail = audit::reader::Tail::new(files);
    loop {
        for event in tail.poll() {
            if !kinds.is_empty() && !kinds.iter().any(|k| k == event.kind.name()) {
                continue;
            }
            if json {
                println!("{}", serde_json::to_string(&event).unwrap_or_default());
            } else {
                println!("{}", render(&event));
            }
        }
        if !follow {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(0)
}

fn latest_session(target: &Target) -> Result<String> {
    let located = super::locate(target)?;
    let state = WorkspaceState::load(&located.devcontainer_id)?;
    state.sessions.last().cloned().ok_or_else(|| {
        Error::NotFound(format!(
            "no sessions yet for {}; start one with `yolo up`",
            located.workspace.display()
        ))
    })
}

fn list_sessions(target: &Target) -> Result<i32> {
    let states = match super::locate(target) {
        Ok(located) => vec![WorkspaceState::load(&located.devcontainer_id)?],
        Err(_) => WorkspaceState::all(),
    };
    for state in states {
        for s in &state.sessions {
            let open = if state.session.as_deref() == Some(s) {
                " (open)"
            } else {
                ""
            };
            println!("{s}{open}  {}", state.workspace);
        }
    }
    Ok(0)
}

/// One line per event for humans.
pub(crate) fn render(event: &Event) -> String {
    let ts = event.ts.format("%Y-%m-%d %H:%M:%S%.3f");
    let kind = event.kind.name();
    let text = match &event.kind {
        EventKind::SessionStart {
            workspace,
            image,
            container,
            config_hash,
            grants,
            ..
        } => format!(
            "{workspace} container={container} image={image} config={}{}",
            &config_hash.get(..12).unwrap_or(config_hash),
            if grants.is_empty() {
                String::new()
            } else {
                format!(" grants={}", grants.join(","))
            }
        ),
        EventKind::SessionStop { reason } => reason.clone(),
        EventKind::Command {
            source,
            argv,
            user,
            exit_code,
            duration_ms,
            ..
        } => format!(
            "{source} user={user} exit={} {duration_ms}ms: {}",
            exit_code.map(|c| c.to_string()).unwrap_or("?".into()),
            shell_words(argv)
        ),
        EventKind::Dns {
            name,
            qtype,
            decision,
            answers,
            ..
        } => {
            format!(
                "{decision} {name} {qtype}{}",
                if answers.is_empty() {
                    String::new()
                } else {
                    format!(" -> {}", answers.join(", "))
                }
            )
        }
        EventKind::Blocked {
            proto,
            dst,
            port,
            name,
        }
        | EventKind::Connection {
            proto,
            dst,
            port,
            name,
        } => format!(
            "{proto} {dst}{}{}",
            port.map(|p| format!(":{p}")).unwrap_or_default(),
            name.as_ref().map(|n| format!(" ({n})")).unwrap_or_default()
        ),
        EventKind::Firewall { action, patterns } => format!("{action} {}", patterns.join(" ")),
        EventKind::Guard { status, details } => {
            format!(
                "{status} {}",
                serde_json::to_string(details).unwrap_or_default()
            )
        }
        EventKind::Notice { message } => message.clone(),
    };
    // What the guard saw while an image build's RUN steps shared its namespace.
    let phase = event
        .phase
        .as_deref()
        .map(|p| format!("[{p}] "))
        .unwrap_or_default();
    format!("{ts} {kind:<13} {phase}{text}")
}

/// The command line on one screen line: quoted like a shell would need, long scripts cut
/// (`--json` has them whole).
fn shell_words(argv: &[String]) -> String {
    const MAX: usize = 160;
    let line = argv
        .iter()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
        .replace('\n', "\\n");
    match line.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::{render, shell_words};
    use crate::audit::event::{Event, EventKind};

    #[test]
    fn a_build_phase_event_says_so() {
        let notice = |phase| {
            let kind = EventKind::Notice {
                message: "m".into(),
            };
            render(&Event::now("s", kind).in_phase(phase))
        };
        assert!(notice(Some("build")).ends_with("notice        [build] m"));
        assert!(notice(None).ends_with("notice        m"));
    }

    #[test]
    fn command_lines_are_quoted_and_kept_on_one_line() {
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            shell_words(&argv(&["sh", "-c", "exit 4"])),
            "sh -c 'exit 4'"
        );
        assert_eq!(shell_words(&argv(&["echo", "it's"])), "echo 'it'\\''s'");
        let long = shell_words(&argv(&["sh", "-c", &"line\n".repeat(100)]));
        assert!(!long.contains('\n'));
        assert!(long.ends_with('…') && long.chars().count() == 161, "{long}");
    }
}
