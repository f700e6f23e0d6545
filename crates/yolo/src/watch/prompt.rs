//! The held questions' one-line prompt in an attached `yolo run` (`[firewall] on_refused =
//! "ask"`): while the guard holds a lookup for the user's answer, the terminal's last row says
//! which name and how to answer, and `Ctrl-]` then a key answers it from there, as
//! `yolo allow --pending` / `yolo deny --pending` do from another terminal.
//!
//! Not breaking the agent's TUI: while the row is shown, the agent's terminal is sized one row
//! shorter (it draws itself again in the rows it has, as on any resize), and the terminal's
//! scrolling region stops above the row, so the agent's output scrolls above it. The row is
//! drawn with the cursor saved and restored (DECSC/DECRC), once the agent's output has been
//! quiet for a moment, so it never lands inside one of the agent's frames; when nothing is
//! asked any more, the row is cleared and the agent gets its full terminal back.
//!
//! Keys: only after `Ctrl-]` (a key terminals and TUIs leave alone; twice sends it to the
//! agent), and only while a question is shown; every other key goes to the agent as before.
//! `a` allows the name for this session, `s` allows it and saves it to the user's config,
//! `r` allows it and saves it to `customizations.yolo` in devcontainer.json (a request for the
//! team to review), `d` refuses it now; anything else goes back. The answer names who gave it
//! (`yolo run's prompt`) in the session's log, as every decision does.
//!
//! What it costs: the cursor position the agent saved with DECSC itself is replaced by ours
//! each time the row is drawn (a TUI that saves the cursor across a whole frame sees it move).

use crate::cli::SuggestTarget;
use crate::engine::{Engine, Overlay};
use crate::project::Located;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Notify};
use yolo_protocol::control::{PendingApproval, Request};

/// The key that comes before an answer: Ctrl-] (GS).
pub(crate) const ANSWER_KEY: u8 = 0x1d;
/// How long the agent's output must be quiet before the row is drawn again.
const QUIET: Duration = Duration::from_millis(150);
/// How long an answer's outcome stays on the row.
const NOTE_FOR: Duration = Duration::from_secs(4);

/// An answer typed at the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) id: u64,
    pub(crate) allow: bool,
    pub(crate) save: Option<SuggestTarget>,
}

/// What the prompt shows and takes; shared by the input relay, the output and its task.
#[derive(Debug, Default)]
struct State {
    pending: Vec<PendingApproval>,
    /// `Ctrl-]` was typed while this question was shown: the next key answers it (this one,
    /// whatever the list shows by then: the agent can time its questions' expiry).
    armed: Option<u64>,
    /// An answer's outcome, until then.
    note: Option<(String, Instant)>,
    /// The row is taken (the agent's terminal one row shorter).
    shown: bool,
    /// The agent wrote since the row was last drawn.
    dirty: bool,
    last_output: Option<Instant>,
    /// What was drawn last, to draw only what changed or was drawn over.
    drawn: String,
}

impl State {
    /// The keys of `input` that are the prompt's are taken out; an answer they make.
    fn take_keys(&mut self, input: &[u8]) -> (Vec<u8>, Option<Answer>) {
        let mut passed = Vec::with_capacity(input.len());
        let mut answer = None;
        for &byte in input {
            if let Some(id) = self.armed.take() {
                self.dirty = true;
                let choice = match byte {
                    ANSWER_KEY => {
                        passed.push(ANSWER_KEY);
                        continue;
                    }
                    b'a' | b'A' | b'y' | b'Y' => Some((true, None)),
                    b's' | b'S' => Some((true, Some(SuggestTarget::User))),
                    b'r' | b'R' => Some((true, Some(SuggestTarget::Repo))),
                    b'd' | b'D' | b'n' | b'N' => Some((false, None)),
                    _ => None,
                };
                if let Some((allow, save)) = choice {
                    // Taken off at once: the next question shows while the guard answers.
                    self.pending.retain(|p| p.id != id);
                    answer = Some(Answer { id, allow, save });
                }
                continue;
            }
            if let (ANSWER_KEY, Some(first)) = (byte, self.pending.first()) {
                self.armed = Some(first.id);
                self.dirty = true;
                continue;
            }
            passed.push(byte);
        }
        (passed, answer)
    }

    /// The row's text, at most `cols` characters.
    fn text(&self, now: Instant, cols: usize) -> String {
        let armed = self
            .armed
            .and_then(|id| self.pending.iter().find(|p| p.id == id));
        let text = match (self.pending.first(), &self.note) {
            (_, Some((note, until))) if *until > now => format!("yolo: {note}"),
            (Some(_), _) if armed.is_some() => format!(
                "yolo: {}: a allow once · s allow and save to your config · r allow and save to devcontainer.json · d refuse · other keys: back",
                crate::visible::escape_controls(armed.map(|q| q.name.as_str()).unwrap_or_default())
            ),
            (Some(q), _) => {
                let more = match self.pending.len() - 1 {
                    0 => String::new(),
                    n => format!(" (+{n} more)"),
                };
                let asks = if q.what == "http" {
                    "asks"
                } else {
                    "looks up"
                };
                format!(
                    "yolo: the agent {asks} {}{more}, refused in {}s · Ctrl-] then a allow, s save, r save for the team, d refuse",
                    crate::visible::escape_controls(&q.name),
                    q.expires_secs
                )
            }
            (None, _) => String::new(),
        };
        text.chars().take(cols.saturating_sub(1)).collect()
    }

    fn wanted(&self, now: Instant) -> bool {
        !self.pending.is_empty() || self.note.as_ref().is_some_and(|(_, until)| *until > now)
    }
}

/// The row drawn: the scrolling region above it, the row itself in reverse video, the cursor
/// where it was.
fn frame(text: &str, rows: u16) -> String {
    format!(
        "\x1b7\x1b[1;{}r\x1b[{rows};1H\x1b[2K\x1b[7m{text}\x1b[0m\x1b8",
        rows.saturating_sub(1).max(1)
    )
}

/// The row taken away: the whole screen scrolls again, the row is blank.
fn cleared(rows: u16) -> String {
    format!("\x1b7\x1b[r\x1b[{rows};1H\x1b[2K\x1b8")
}

/// The prompt of one attached run; its task runs until [`Prompt::finish`].
#[derive(Debug)]
pub(crate) struct Prompt {
    state: Mutex<State>,
    changed: Notify,
    answers: mpsc::UnboundedSender<Answer>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Prompt {
    /// Start the prompt for the session of `located`: it asks the session's guard for its held
    /// questions (every second; every five on a remote engine, where each ask is a
    /// `docker exec`). None when the session has no guard (`--network none`).
    pub(crate) async fn start(engine: &Engine, located: &Located) -> Option<Arc<Prompt>> {
        let guard = crate::session::firewall::running_guard(engine, located)
            .await
            .ok()?;
        let (answers, mut answered) = mpsc::unbounded_channel();
        let prompt = Arc::new(Prompt {
            state: Mutex::default(),
            changed: Notify::new(),
            answers,
            task: Mutex::new(None),
        });
        let every = if crate::engine::remote::remote_reason().is_ok_and(|r| r.is_some()) {
            Duration::from_secs(5)
        } else {
            Duration::from_secs(1)
        };
        let (engine, located, me) = (engine.clone(), located.clone(), prompt.clone());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            let mut asked = Instant::now() - every;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    Some(answer) = answered.recv() => {
                        let note = me.answer(&located, answer).await;
                        me.state().note = Some((note, Instant::now() + NOTE_FOR));
                        asked = Instant::now() - every;
                    }
                }
                if asked.elapsed() >= every {
                    asked = Instant::now();
                    let Ok(response) = engine.control(&guard, &Request::Pending).await else {
                        // The guard is gone (the session ended): nothing more to ask.
                        me.state().pending.clear();
                        me.draw();
                        return;
                    };
                    let mut state = me.state();
                    state.pending = response.pending;
                    // An armed answer stays for its question (the guard refuses an id it no
                    // longer holds); with none left, it goes.
                    if state.pending.is_empty() {
                        state.armed = None;
                    }
                    drop(state);
                }
                me.draw();
            }
        });
        *prompt.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        Some(prompt)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Answer one question as `yolo allow/deny --pending` would; the outcome in words.
    async fn answer(&self, located: &Located, answer: Answer) -> String {
        match crate::commands::firewall::answer(
            located,
            answer.id,
            answer.allow,
            answer.save,
            "yolo run's prompt",
        )
        .await
        {
            Ok(said) => said.join("; "),
            Err(e) => format!("not answered: {e}"),
        }
    }

    /// Take the row, give it back, or draw it again, as the questions and the agent's
    /// output say.
    fn draw(&self) {
        let now = Instant::now();
        let Ok((cols, rows)) = crossterm::terminal::size() else {
            return;
        };
        if rows < 3 || cols < 10 {
            return;
        }
        let mut state = self.state();
        let wanted = state.wanted(now);
        let out = if wanted {
            let text = state.text(now, cols as usize);
            let quiet = state.last_output.is_none_or(|t| t.elapsed() >= QUIET);
            let fresh = !state.shown || text != state.drawn || state.dirty;
            if !state.shown {
                state.shown = true;
                self.changed.notify_one();
            }
            if !(fresh && quiet) {
                return;
            }
            state.dirty = false;
            state.drawn = text.clone();
            frame(&text, rows)
        } else if state.shown {
            state.shown = false;
            state.drawn.clear();
            self.changed.notify_one();
            cleared(rows)
        } else {
            return;
        };
        drop(state);
        let mut stdout = std::io::stdout().lock();
        let _ = stdout
            .write_all(out.as_bytes())
            .and_then(|()| stdout.flush());
    }

    /// The run is over: the task stopped and the row given back.
    pub(crate) fn finish(&self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
        let mut state = self.state();
        state.pending.clear();
        state.note = None;
        drop(state);
        self.draw();
    }
}

impl Overlay for Prompt {
    fn input(&self, input: &[u8]) -> Vec<u8> {
        let (passed, answer) = self.state().take_keys(input);
        if let Some(answer) = answer {
            let _ = self.answers.send(answer);
        }
        passed
    }

    fn output(&self) {
        let mut state = self.state();
        state.dirty = true;
        state.last_output = Some(Instant::now());
    }

    fn rows_taken(&self) -> u16 {
        u16::from(self.state().shown)
    }

    fn changed(&self) -> &Notify {
        &self.changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(id: u64, name: &str) -> PendingApproval {
        PendingApproval {
            id,
            what: "dns".into(),
            name: name.into(),
            qtype: "A".into(),
            asked: chrono::Utc::now(),
            expires_secs: 20,
            waiting: 1,
        }
    }

    #[test]
    fn keys_pass_unless_a_question_is_shown_and_ctrl_bracket_comes_first() {
        let mut state = State::default();
        // Nothing asked: even Ctrl-] is the agent's.
        assert_eq!(state.take_keys(b"ab\x1dd"), (b"ab\x1dd".to_vec(), None));
        state.pending = vec![question(7, "x.test"), question(8, "y.test")];
        // Plain keys are the agent's while a question is shown.
        assert_eq!(state.take_keys(b"asrd"), (b"asrd".to_vec(), None));
        // Ctrl-] then s: the first question allowed and saved, the key never reaches the agent.
        let (passed, answer) = state.take_keys(b"hi\x1ds!");
        assert_eq!(passed, b"hi!");
        assert_eq!(
            answer,
            Some(Answer {
                id: 7,
                allow: true,
                save: Some(SuggestTarget::User)
            })
        );
        assert_eq!(state.pending.len(), 1, "the answered one is taken off");
        // Split over two reads, and d refuses.
        assert_eq!(state.take_keys(b"\x1d"), (Vec::new(), None));
        assert_eq!(
            state.take_keys(b"d").1,
            Some(Answer {
                id: 8,
                allow: false,
                save: None
            })
        );
        // Twice sends one to the agent; another key goes back without an answer.
        state.pending = vec![question(9, "z.test")];
        assert_eq!(state.take_keys(b"\x1d\x1d"), (vec![ANSWER_KEY], None));
        assert_eq!(state.take_keys(b"\x1d\x1bq"), (b"q".to_vec(), None));
        assert_eq!(state.pending.len(), 1);
        assert_eq!(
            state.take_keys(b"\x1dr").1.map(|a| a.save),
            Some(Some(SuggestTarget::Repo))
        );
        // The answer is for the question shown at Ctrl-], even if the list changed since.
        state.pending = vec![question(10, "shown.test"), question(11, "next.test")];
        state.take_keys(b"\x1d");
        state.pending.remove(0);
        assert_eq!(state.take_keys(b"a").1.map(|a| a.id), Some(10));
        assert_eq!(state.pending.len(), 1);
    }

    #[test]
    fn the_row_names_the_question_fits_the_width_and_escapes_the_name() {
        let now = Instant::now();
        let mut state = State {
            pending: vec![
                question(1, "evil\x1b]52;c;x\x07.test"),
                question(2, "b.test"),
            ],
            ..State::default()
        };
        let text = state.text(now, 200);
        assert!(text.starts_with("yolo: the agent looks up evil"), "{text}");
        assert!(text.contains("(+1 more)"), "{text}");
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text}");
        assert_eq!(state.text(now, 40).chars().count(), 39);
        state.armed = Some(2);
        let armed = state.text(now, 200);
        assert!(armed.starts_with("yolo: b.test: a allow once"), "{armed}");
        state.note = Some(("allowed b.test".into(), now + NOTE_FOR));
        assert_eq!(state.text(now, 200), "yolo: allowed b.test");
        state.pending.clear();
        assert!(state.wanted(now), "the outcome stays a moment");
        assert!(!state.wanted(now + NOTE_FOR));
    }

    #[test]
    fn the_row_keeps_the_agents_cursor_and_scrolls_nothing_over_it() {
        let drawn = frame("hello", 24);
        assert!(drawn.starts_with("\x1b7") && drawn.ends_with("\x1b8"));
        assert!(drawn.contains("\x1b[1;23r") && drawn.contains("\x1b[24;1H"));
        let gone = cleared(24);
        assert!(gone.contains("\x1b[r") && gone.contains("\x1b[24;1H\x1b[2K"));
    }
}
