//! One event as one line of text for humans: what `yolo audit` prints and what the report's
//! timeline shows. The text is not yet safe for where it goes: the caller escapes it for its
//! medium (`visible::escape_controls` for a terminal, `report::esc` for HTML).

use super::{Event, EventKind};

/// One line per event for humans: time, kind, then [`describe`].
pub(crate) fn render(event: &Event) -> String {
    let ts = event.ts.format("%Y-%m-%d %H:%M:%S%.3f");
    let kind = event.kind.name();
    format!("{ts} {kind:<13} {}", describe(event))
}

/// What happened, without the time and kind.
pub(crate) fn describe(event: &Event) -> String {
    let text = match &event.kind {
        EventKind::SessionStart {
            workspace,
            image,
            container,
            config_hash,
            grants,
            extra_ca,
            ..
        } => format!(
            "{workspace} container={container} image={image} config={}{}{}",
            &config_hash.get(..12).unwrap_or(config_hash),
            if grants.is_empty() {
                String::new()
            } else {
                format!(" grants={}", grants.join(","))
            },
            if extra_ca.is_empty() {
                String::new()
            } else {
                format!(" extra_ca={}", extra_ca.join(","))
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
            sample_of,
            count,
            first,
            last,
            ..
        } => {
            format!(
                "{decision} {name} {qtype}{}{}{}",
                if answers.is_empty() {
                    String::new()
                } else {
                    format!(" -> {}", answers.join(", "))
                },
                repeats(*count, *first, *last),
                sampled(sample_of, "lookups under the allowlist entry")
            )
        }
        EventKind::Blocked {
            proto,
            dst,
            port,
            name,
            sample_of,
            count,
            first,
            last,
        } => format!(
            "{}{}{}",
            destination(proto, dst, *port, name),
            repeats(*count, *first, *last),
            sampled(sample_of, "attempts to")
        ),
        EventKind::Connection {
            proto,
            dst,
            port,
            name,
            count,
            first,
            last,
        } => format!(
            "{}{}",
            destination(proto, dst, *port, name),
            repeats(*count, *first, *last)
        ),
        EventKind::Firewall { action, patterns } => format!("{action} {}", patterns.join(" ")),
        EventKind::Guard { status, details } => {
            format!(
                "{status} {}",
                serde_json::to_string(details).unwrap_or_default()
            )
        }
        EventKind::WatchedFile {
            path, change, git, ..
        } => format!(
            "{change} {}{}",
            crate::visible::escape_controls(path),
            if *git {
                " (git reads its config through it)"
            } else {
                ""
            }
        ),
        EventKind::Exec {
            pid,
            uid,
            cwd,
            argv,
            path,
            exe,
            result,
            exit_code,
            duration_ms,
            argv_rewritten,
            loader_env,
            ld_so_preload,
            ld_so_preload_paths,
            loader_values,
            pending_signals,
            ..
        } => format!(
            "pid={pid} uid={uid} {}{}{}{}{}in {}: {}",
            // A failed exec says which file it tried (a PATH search tries several).
            if result == "ok" {
                String::new()
            } else {
                format!("{result} {} ", crate::visible::escape_controls(path))
            },
            exit_code
                .map(|c| format!(
                    "exit={c} {}",
                    duration_ms.map(|d| format!("{d}ms ")).unwrap_or_default()
                ))
                .unwrap_or_default(),
            if *argv_rewritten {
                "(argv rewritten before the exec) "
            } else {
                ""
            },
            exec_warnings(
                loader_env,
                *ld_so_preload,
                ld_so_preload_paths,
                loader_values,
                pending_signals
            ),
            // Before the agent's words (cwd, argv), so that they cannot seem to be it.
            exe_shown(argv, exe.as_deref())
                .map(|exe| format!(
                    "exe={} ",
                    crate::visible::escape_controls(&shell_words(&[exe.to_string()]))
                ))
                .unwrap_or_default(),
            crate::visible::escape_controls(cwd),
            crate::visible::escape_controls(&shell_words(argv))
        ),
        EventKind::ExecExit {
            pid,
            exit_code,
            signal,
            duration_ms,
            ..
        } => format!(
            "pid={pid} exit={exit_code}{} {duration_ms}ms",
            signal.as_ref().map(|s| format!(" ({s})")).unwrap_or_default()
        ),
        EventKind::ExecDigest {
            id,
            pid,
            sha256,
            changed,
            error,
            library,
        } => format!(
            "pid={pid} exec {id}: {}{}{}",
            library
                .as_ref()
                .map(|l| format!(
                    "preloaded library {} ",
                    crate::visible::escape_controls(&shell_words(std::slice::from_ref(l)))
                ))
                .unwrap_or_default(),
            match (sha256, error) {
                (Some(hex), _) => format!("sha256 {hex}"),
                (None, Some(why)) => format!("no hash ({})", crate::visible::escape_controls(why)),
                (None, None) => "no hash".into(),
            },
            if *changed {
                " (the file changed, or may have, while it was hashed: not surely what ran)"
            } else {
                ""
            }
        ),
        EventKind::Unsupervised {
            pid, exe, argv, ..
        } => format!(
            "pid={pid} runs without the exec filter (its execs are not recorded): {} {}",
            crate::visible::escape_controls(exe),
            crate::visible::escape_controls(&shell_words(argv))
        ),
        EventKind::File {
            path,
            change,
            from,
            sensitive,
            links,
            count,
            first,
            last,
            ..
        } => format!(
            "{change} {}{}{}{}",
            from.as_ref()
                .map(|f| format!("{} -> ", crate::visible::escape_controls(f)))
                .unwrap_or_default(),
            crate::visible::escape_controls(path),
            match (sensitive, links.is_empty()) {
                (false, _) => String::new(),
                (true, true) => " (sensitive)".to_string(),
                (true, false) => format!(
                    " (sensitive: the same file as {})",
                    links
                        .iter()
                        .map(|l| crate::visible::escape_controls(l))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
            repeats(*count, *first, *last)
        ),
        EventKind::FeatureFetch {
            reference,
            digest,
            cached,
            bytes,
        } => format!(
            "Feature {} {} ({bytes} bytes{})",
            crate::visible::escape_controls(reference),
            crate::visible::escape_controls(digest),
            if *cached { ", from the cache" } else { "" }
        ),
        EventKind::Http {
            method,
            host,
            path,
            status,
            bytes_up,
            bytes_down,
            duration_ms,
            rule,
            credential,
            refused,
            ..
        } => format!(
            "{} {}{} -> {status}{} ({bytes_up} B up, {bytes_down} B down, {duration_ms} ms, rule {}{})",
            crate::visible::escape_controls(method),
            crate::visible::escape_controls(host),
            crate::visible::escape_controls(path),
            if *refused { " refused by the guard" } else { "" },
            crate::visible::escape_controls(rule),
            credential
                .as_deref()
                .map(|c| format!(", credential {}", crate::visible::escape_controls(c)))
                .unwrap_or_default()
        ),
        EventKind::CredentialMisuse {
            credential,
            host,
            method,
            path,
        } => format!(
            "the stand-in of credential {} sent to {} ({} {}): refused",
            crate::visible::escape_controls(credential),
            crate::visible::escape_controls(host),
            crate::visible::escape_controls(method),
            crate::visible::escape_controls(path)
        ),
        EventKind::Notice { message } => message.clone(),
        EventKind::Suppressed {
            of,
            count,
            first,
            last,
            max_bytes,
        } => format!(
            "{count} {of} events not written since {}: the session log reached its cap of {max_bytes} bytes (last at {})",
            first.format("%H:%M:%S%.3f"),
            last.format("%H:%M:%S%.3f")
        ),
        EventKind::ChainEnd { records } => {
            format!("end of this writer's records ({records} before it in the file; `yolo audit verify` checks them)")
        }
        EventKind::Approval {
            id,
            what,
            name,
            decision,
            by,
            how,
        } => {
            let name = crate::visible::escape_controls(name);
            match decision.as_str() {
                "asked" => format!("held {what} {name} for your answer (question {id}: `yolo approvals`)"),
                "timed_out" => format!("refused {what} {name}: question {id} was not answered in time"),
                other => format!(
                    "{other} {what} {name} (question {id}){}{}",
                    by.as_deref()
                        .map(|b| format!(" by {}", crate::visible::escape_controls(b)))
                        .unwrap_or_default(),
                    how.as_deref().map(|h| format!(", {h}")).unwrap_or_default()
                ),
            }
        }
    };
    // What the guard saw while an image build's RUN steps shared its namespace.
    let phase = event
        .phase
        .as_deref()
        .map(|p| format!("[{p}] "))
        .unwrap_or_default();
    format!("{phase}{text}")
}

/// The folders a bare program name is found in, for [`exe_shown`].
const USUAL_BIN: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// The binary the kernel ran (`exe`), when the command line does not say it: the agent chooses
/// `argv[0]` freely, so `curl` run as `/usr/bin/true`, or a program run from a memfd, would
/// read as `true`. `None` when `argv[0]` is `exe` itself, or a bare name that is `exe`'s file
/// name in one of the usual program folders (`ls` for `/usr/bin/ls`). A memfd or a deleted
/// file (` (deleted)`, as the kernel names it) is always shown.
pub(crate) fn exe_shown<'a>(argv: &[String], exe: Option<&'a str>) -> Option<&'a str> {
    let exe = exe.filter(|e| !e.is_empty())?;
    if exe.starts_with("/memfd:") || exe.ends_with(" (deleted)") {
        return Some(exe);
    }
    let called = argv.first().map(String::as_str).unwrap_or_default();
    let bare = !called.is_empty() && !called.contains('/');
    let named = exe == called
        || (bare
            && USUAL_BIN.iter().any(|dir| {
                exe.strip_prefix(dir).and_then(|r| r.strip_prefix('/')) == Some(called)
            }));
    (!named).then_some(exe)
}

/// ` (x2000 from 10:15:02.123 to 10:15:04.551)` for an aggregated record; empty for one.
/// A blocked or opened destination as every view writes it: `tcp 192.0.2.1:443 (example.com)`.
pub(crate) fn destination(
    proto: &str,
    dst: &str,
    port: Option<u16>,
    name: &Option<String>,
) -> String {
    format!(
        "{proto} {dst}{}{}",
        port.map(|p| format!(":{p}")).unwrap_or_default(),
        name.as_ref().map(|n| format!(" ({n})")).unwrap_or_default()
    )
}

/// A sample record past the log's cap says it stands for more than its name or destination.
fn sampled(sample_of: &Option<String>, what: &str) -> String {
    match sample_of {
        Some(group) => {
            format!(" [the first of the {what} {group} not written one by one past the log's cap]")
        }
        None => String::new(),
    }
}

fn repeats(
    count: Option<u64>,
    first: Option<chrono::DateTime<chrono::Utc>>,
    last: Option<chrono::DateTime<chrono::Utc>>,
) -> String {
    let Some(count) = count else {
        return String::new();
    };
    let at = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map(|t| t.format("%H:%M:%S%.3f").to_string())
            .unwrap_or_else(|| "?".into())
    };
    format!(" (x{count} from {} to {})", at(first), at(last))
}

/// The command line on one screen line: quoted like a shell would need, long scripts cut
/// (`--json` has them whole).
pub(crate) fn shell_words(argv: &[String]) -> String {
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

/// What in an exec's record says code other than its binary may run in it, or that its
/// arguments could change after the record: one parenthesised note each, or nothing.
pub(crate) fn exec_warnings(
    loader_env: &[String],
    ld_so_preload: bool,
    ld_so_preload_paths: &[String],
    loader_values: &std::collections::BTreeMap<String, String>,
    pending_signals: &[String],
) -> String {
    let mut notes = String::new();
    if !loader_env.is_empty() {
        let named: Vec<String> = loader_env
            .iter()
            .map(|name| match loader_values.get(name) {
                Some(value) => format!("{name}={}", shell_words(std::slice::from_ref(value))),
                None => name.clone(),
            })
            .collect();
        notes.push_str(&format!(
            "(loader variables: {}) ",
            crate::visible::escape_controls(&named.join(" "))
        ));
    }
    if ld_so_preload {
        notes.push_str(&format!(
            "(/etc/ld.so.preload exists: its libraries load into this program{}) ",
            if ld_so_preload_paths.is_empty() {
                String::new()
            } else {
                format!(
                    ": {}",
                    crate::visible::escape_controls(&ld_so_preload_paths.join(" "))
                )
            }
        ));
    }
    if !pending_signals.is_empty() {
        notes.push_str(&format!(
            "({} pending at the exec: its arguments could change after this record) ",
            pending_signals.join(" ")
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use yolo_protocol::event::{Event, EventKind};

    fn exec(result: &str, exit_code: Option<i64>) -> Event {
        Event::now(
            "s",
            crate::audit::testing::Exec {
                id: 1,
                pid: 42,
                ppid: 7,
                uid: 1000,
                path: "/usr/local/bin/sleep",
                exe: None,
                argv: &["sleep", "1"],
                result,
                exit_code,
                duration_ms: exit_code.map(|_| 5),
                ..Default::default()
            }
            .kind(),
        )
    }

    /// The binary that ran is shown when argv[0] does not name it: a renamed program, a
    /// memfd, a deleted file.
    #[test]
    fn an_exec_line_shows_the_binary_when_argv_does_not_name_it() {
        let with = |argv: &[&str], exe: &str| {
            let mut event = exec("ok", Some(0));
            if let EventKind::Exec {
                argv: a, exe: e, ..
            } = &mut event.kind
            {
                *a = argv.iter().map(|s| s.to_string()).collect();
                *e = Some(exe.to_string());
            }
            render(&event)
        };
        let line = with(&["/usr/bin/true"], "/usr/bin/curl");
        assert!(
            line.ends_with("exit=0 5ms exe=/usr/bin/curl in /workspace: /usr/bin/true"),
            "{line}"
        );
        let line = with(&["true"], "/memfd:x (deleted)");
        assert!(
            line.ends_with("exe='/memfd:x (deleted)' in /workspace: true"),
            "{line}"
        );
        let line = with(&["/tmp/t"], "/tmp/t (deleted)");
        assert!(line.contains("exe='/tmp/t (deleted)' in"), "{line}");
        let line = with(&["true"], "/tmp/true");
        assert!(line.contains("exe=/tmp/true in"), "{line}");
        // Named by its path, or by its name in a usual folder: nothing more to say.
        for (argv0, exe) in [
            ("/usr/bin/true", "/usr/bin/true"),
            ("true", "/usr/bin/true"),
        ] {
            let line = with(&[argv0], exe);
            assert!(!line.contains("exe="), "{line}");
        }
    }

    /// A program that ran shows its exit; one that did not shows the error and the file tried.
    #[test]
    fn an_exec_line_says_how_it_ended_or_which_file_it_tried() {
        let ran = render(&exec("ok", Some(3)));
        assert!(
            ran.ends_with("pid=42 uid=1000 exit=3 5ms in /workspace: sleep 1"),
            "{ran}"
        );
        let missed = render(&exec("ENOENT", None));
        assert!(
            missed.ends_with("pid=42 uid=1000 ENOENT /usr/local/bin/sleep in /workspace: sleep 1"),
            "{missed}"
        );
    }
}
