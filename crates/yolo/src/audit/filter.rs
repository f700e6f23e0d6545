//! What `yolo audit` reads and prints: a session's log read as one timeline (`SessionLog`),
//! its events chosen by kind, time and text (`Filter`), each as one line (`line::render`) or
//! its JSON.

use super::line::render;
use super::{reader, Event, EventKind};
use crate::error::{Error, Result};

/// A session's log as `yolo audit` reads it, never whole at once (docs/performance.md): what
/// is in it already, one timeline in which each exec carries its exit; then, when following,
/// what comes as it is written, an exit on its own line when it happens.
pub(crate) struct SessionLog {
    tail: reader::Tail,
    exits: reader::Exits,
    keep_exits: bool,
}

impl SessionLog {
    /// The log of `session`, read for `filter`.
    pub(crate) fn open(session: &str, filter: &Filter) -> Result<SessionLog> {
        let files = super::session_files(session);
        if !files.iter().any(|f| f.exists()) {
            return Err(Error::NotFound(format!(
                "no audit log for session {session}; `yolo audit --list` shows the sessions"
            )));
        }
        let mut tail = reader::Tail::new(files.clone());
        if !filter.kinds.is_empty() {
            tail = tail.only_containing(filter.needles());
        }
        let keep_exits = filter
            .kinds
            .iter()
            .any(|k| k == "exec_exit" || k == "exec_digest");
        let exits = if filter.joins() {
            reader::Exits::scan(&files)
        } else {
            reader::Exits::none()
        };
        Ok(SessionLog {
            tail,
            exits,
            keep_exits,
        })
    }

    /// What is in the log now, each exec with its exit.
    pub(crate) fn past(&mut self) -> impl Iterator<Item = Event> + '_ {
        let (exits, keep) = (&mut self.exits, self.keep_exits);
        self.tail.poll().filter_map(move |e| exits.join(e, keep))
    }

    /// What was written since the last read, as it is.
    pub(crate) fn new_events(&mut self) -> impl Iterator<Item = Event> + '_ {
        self.tail.poll()
    }
}

/// Which events `yolo audit` prints.
#[derive(Debug, Default)]
pub(crate) struct Filter {
    /// Only these kinds (none: every kind).
    pub(crate) kinds: Vec<String>,
    /// Only events at or after this time (an aggregated record counts at its last attempt).
    pub(crate) since: Option<chrono::DateTime<chrono::Utc>>,
    /// Only events whose printed line contains this, ignoring case.
    pub(crate) grep: Option<String>,
    /// Events come as they are written (`--follow`, past what was in the log): an `exec_exit`
    /// is no longer joined into its `exec`, so `--kind exec` takes it too.
    pub(crate) live: bool,
}

impl Filter {
    /// The line to print for `event`, if it passes.
    pub(crate) fn line(&self, event: &Event, json: bool) -> Option<String> {
        if !self.kinds.is_empty() && !self.kinds.iter().any(|k| self.takes(k, event)) {
            return None;
        }
        // The hash chain's closing records are for `yolo audit verify`, not the timeline
        // (`--json` and `--kind chain_end` show them).
        if !json && self.kinds.is_empty() && matches!(event.kind, EventKind::ChainEnd { .. }) {
            return None;
        }
        if self.since.is_some_and(|since| last_time(event) < since) {
            return None;
        }
        let line = if json {
            serde_json::to_string(event).unwrap_or_default()
        } else {
            // The agent chose the argv and names recorded here.
            crate::visible::escape_controls(&render(event))
        };
        match &self.grep {
            Some(text) if !line.to_lowercase().contains(&text.to_lowercase()) => None,
            _ => Some(line),
        }
    }
}

impl Filter {
    /// What a line of a kind the filter takes must contain (its kind as a JSON string), for
    /// `reader::Tail::only_containing`.
    pub(crate) fn needles(&self) -> Vec<String> {
        let mut kinds = self.kinds.clone();
        if kinds.iter().any(|k| k == "exec") {
            // Joined into the exec, or printed as it comes with --follow.
            kinds.push("exec_exit".into());
        }
        kinds.iter().map(|k| format!("\"{k}\"")).collect()
    }

    /// Whether the events printed may need an exit joined into their exec.
    pub(crate) fn joins(&self) -> bool {
        self.kinds.is_empty()
            || self
                .kinds
                .iter()
                .any(|k| k == "exec" || k == "exec_exit" || k == "exec_digest")
    }

    fn takes(&self, kind: &str, event: &Event) -> bool {
        let name = event.kind.name();
        kind == name || (self.live && kind == "exec" && name == "exec_exit")
    }
}

/// When an event's last attempt happened: a folded record is written up to a second after its
/// attempts, so a repeat from before a given time must not count as after it.
pub(crate) fn last_time(event: &Event) -> chrono::DateTime<chrono::Utc> {
    event.kind.folded().and_then(|f| f.last).unwrap_or(event.ts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::line::render;
    use crate::audit::line::shell_words;
    use crate::audit::EventKind;

    #[test]
    fn the_filter_takes_kinds_a_time_and_text() {
        let at = |s: &str| -> chrono::DateTime<chrono::Utc> { s.parse().unwrap() };
        let event = |ts: &str, kind| Event {
            ts: at(ts),
            session: "s".into(),
            phase: None,
            kind,
        };
        let notice = event(
            "2026-11-22T10:00:00Z",
            EventKind::Notice {
                message: "Hello there".into(),
            },
        );
        let all = Filter::default();
        assert!(all.line(&notice, false).unwrap().ends_with("Hello there"));
        let kinds = Filter {
            kinds: vec!["dns".into()],
            ..Filter::default()
        };
        assert_eq!(kinds.line(&notice, false), None);
        let since = |t: &str| Filter {
            since: Some(at(t)),
            ..Filter::default()
        };
        assert!(since("2026-11-22T10:00:00Z").line(&notice, false).is_some());
        assert_eq!(since("2026-11-22T10:00:01Z").line(&notice, false), None);
        let grep = |t: &str| Filter {
            grep: Some(t.into()),
            ..Filter::default()
        };
        assert!(grep("HELLO").line(&notice, false).is_some());
        assert_eq!(grep("absent").line(&notice, false), None);
        // With --json the JSON is what is searched.
        assert!(grep("\"kind\":\"notice\"").line(&notice, true).is_some());
    }

    /// What the agent chose (a cwd with a newline and an escape) stays on the event's line.
    #[test]
    fn an_event_is_one_line_whatever_the_agent_put_in_it() {
        let event = Event::now(
            "s",
            crate::audit::testing::Exec {
                id: 1,
                path: "/bin/echo",
                exe: Some("/usr/bin/echo"),
                argv: &["/bin/echo", "a\nb\x1b]52;c;eA==\x07"],
                cwd: "/tmp/x\n2026-01-01 00:00:00.000 notice        all clear\x1b[2J",
                exit_code: Some(0),
                duration_ms: Some(1),
                ..Default::default()
            }
            .kind(),
        );
        let line = Filter::default().line(&event, false).unwrap();
        assert!(!line.contains('\n') && !line.contains('\x1b'), "{line:?}");
        assert!(
            line.contains("in /tmp/x\\n2026-01-01 00:00:00.000 notice        all clear\\x1b[2J: "),
            "{line}"
        );
    }

    #[test]
    fn following_exec_takes_the_exits_as_they_come() {
        let exit = Event::now(
            "s",
            EventKind::ExecExit {
                id: 1,
                pid: 2,
                exit_code: 3,
                signal: None,
                duration_ms: 4,
            },
        );
        let exec = |live| Filter {
            kinds: vec!["exec".into()],
            live,
            ..Filter::default()
        };
        // What was in the log is joined (`reader::join_exits`): a lone exit there is not an exec.
        assert_eq!(exec(false).line(&exit, false), None);
        assert!(exec(true)
            .line(&exit, false)
            .unwrap()
            .contains("pid=2 exit=3 4ms"));
    }

    #[test]
    fn aggregated_and_suppressed_records_say_how_many() {
        let at = |s: &str| -> chrono::DateTime<chrono::Utc> { s.parse().unwrap() };
        let event = |kind| Event {
            ts: at("2025-03-04T10:15:05Z"),
            session: "s".into(),
            phase: None,
            kind,
        };
        let folded = EventKind::Blocked {
            proto: "tcp".into(),
            dst: "192.0.2.1".into(),
            port: Some(80),
            name: Some("x.test".into()),
            sample_of: None,
            count: Some(1999),
            first: Some(at("2025-03-04T10:15:02.5Z")),
            last: Some(at("2025-03-04T10:15:04Z")),
        };
        assert_eq!(
            render(&event(folded)),
            "2025-03-04 10:15:05.000 blocked       tcp 192.0.2.1:80 (x.test) (x1999 from 10:15:02.500 to 10:15:04.000)"
        );
        let suppressed = EventKind::Suppressed {
            of: "dns".into(),
            count: 120000,
            first: at("2025-03-04T10:15:02Z"),
            last: at("2025-03-04T10:15:04Z"),
            max_bytes: 1 << 20,
        };
        assert_eq!(
            render(&event(suppressed)),
            "2025-03-04 10:15:05.000 suppressed    120000 dns events not written since 10:15:02.000: the session log reached its cap of 1048576 bytes (last at 10:15:04.000)"
        );
    }

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
