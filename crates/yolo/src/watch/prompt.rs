//! The held questions' one-line prompt in an attached `yolo run` (`[firewall] on_refused =
//! "ask"`): while the guard holds a lookup or a request for the user's answer, the terminal's
//! last row says what is asked, and `Ctrl-]` then a key answers it from there, as
//! `yolo allow --pending` / `yolo deny --pending` do from another terminal.
//!
//! Not breaking the agent's TUI: while the row is shown, the agent's terminal is sized one row
//! shorter (it draws itself again in the rows it has, as on any resize), and the terminal's
//! scrolling region stops above the row, so the agent's output scrolls above it. The row is
//! drawn with the cursor saved and restored (DECSC/DECRC), once the agent's output has been
//! quiet for a moment, so it seldom lands inside one of the agent's frames (an agent that
//! never pauses gets it every [`STALE`] all the same); when nothing is asked any more, the row
//! is cleared and the agent gets its full terminal back.
//!
//! The agent writes to the same terminal and can draw anything on that row, a made-up
//! question included. So the row a user reads before `Ctrl-]` is only a hint, and an answer is
//! given only to what yolo itself shows after it:
//! - `Ctrl-]` (a key terminals and TUIs leave alone; twice sends it to the agent) takes the
//!   first question held, holds the agent's output back (nothing it writes reaches the
//!   terminal until the answer or [`ARMED_FOR`]) and draws the question at once, whole:
//!   "let the agent look up NAME?" with the keys.
//! - The answer key counts only once that row has been on the screen for [`READ_FIRST`]
//!   (typed at once, `Ctrl-]` and `a` together, it answers nothing: the row says to read it
//!   and press again). It answers the question that row names, whatever the list holds by
//!   then.
//! - A question that does not fit the row whole is not answered here: the row says to use
//!   `yolo approvals`, where it is shown whole.
//!
//! `a` allows for this session, `s` allows and saves to the user's config, `r` (lookups only)
//! allows and saves to `customizations.yolo` in devcontainer.json (a request for the team to
//! review), `d` refuses now; any other key goes back, with the rest of its escape sequence
//! (an arrow key). The answer names who gave it (`yolo run's prompt`) in the session's log.
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
/// How long at most the row goes undrawn while the agent writes without a pause (an agent
/// that never pauses must not keep the question off the screen, nor its own words on it).
const STALE: Duration = Duration::from_millis(500);
/// How long an answer's outcome stays on the row.
const NOTE_FOR: Duration = Duration::from_secs(4);
/// How long the question yolo draws after `Ctrl-]` must have been on the screen before a key
/// answers it.
pub(crate) const READ_FIRST: Duration = Duration::from_secs(1);
/// How long `Ctrl-]` waits for its answer key (the agent's output held back meanwhile).
const ARMED_FOR: Duration = Duration::from_secs(30);
/// The guard's list asked for this many times in a row without an answer: the session is
/// taken to be over.
const GONE_AFTER: u32 = 5;

/// An answer typed at the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) id: u64,
    pub(crate) allow: bool,
    pub(crate) save: Option<SuggestTarget>,
}

/// The question `Ctrl-]` took, until its answer key.
#[derive(Debug)]
struct Armed {
    /// As it was at `Ctrl-]`: what the row shows and the answer is for.
    question: PendingApproval,
    at: Instant,
    /// When the row showing it was drawn (as it is now); `None`: not yet.
    drawn: Option<Instant>,
    /// The question fit that row whole.
    fits: bool,
    /// An answer key came before the row had been there [`READ_FIRST`].
    early: bool,
}

/// What comes after an escape typed while armed: dropped with it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Swallow {
    #[default]
    Nothing,
    /// The byte after ESC: `[` (CSI), `O` (SS3), or the key of an Alt chord.
    Escape,
    /// A CSI's bytes up to its final one.
    Csi,
    /// SS3's one byte.
    Ss3,
}

/// What the prompt shows and takes; shared by the input relay, the output and its task.
#[derive(Debug, Default)]
struct State {
    pending: Vec<PendingApproval>,
    armed: Option<Armed>,
    /// An answer's outcome, until then.
    note: Option<(String, Instant)>,
    /// The row is taken (the agent's terminal one row shorter).
    shown: bool,
    /// The agent wrote since the row was last drawn.
    dirty: bool,
    last_output: Option<Instant>,
    /// The agent's output is being written now (between `may_write` and `output`).
    writing: bool,
    /// What was drawn last, to draw only what changed or was drawn over.
    drawn: String,
    /// The terminal's size when it was drawn: a resize draws it again.
    drawn_size: (u16, u16),
    /// When it was drawn.
    drawn_at: Option<Instant>,
    /// ` --copy NAME` for a named session's run, in the commands the row names.
    flag: String,
}

impl State {
    /// The keys of `input` that are the prompt's are taken out; an answer they make.
    fn take_keys(&mut self, input: &[u8], now: Instant) -> (Vec<u8>, Option<Answer>) {
        let mut passed = Vec::with_capacity(input.len());
        let mut answer = None;
        // An escape sequence comes in one read; one cut at its end is not followed.
        let mut swallow = Swallow::Nothing;
        for &byte in input {
            match swallow {
                Swallow::Nothing => {}
                Swallow::Escape => {
                    swallow = match byte {
                        b'[' => Swallow::Csi,
                        b'O' => Swallow::Ss3,
                        _ => Swallow::Nothing,
                    };
                    continue;
                }
                Swallow::Csi => {
                    if (0x40..=0x7e).contains(&byte) {
                        swallow = Swallow::Nothing;
                    }
                    continue;
                }
                Swallow::Ss3 => {
                    swallow = Swallow::Nothing;
                    continue;
                }
            }
            if let Some(armed) = &mut self.armed {
                self.dirty = true;
                let http = armed.question.what == "http";
                let choice = match byte {
                    b'a' | b'A' | b'y' | b'Y' => Some((true, None)),
                    b's' | b'S' => Some((true, Some(SuggestTarget::User))),
                    // A request's rule cannot be saved to the repository (its rules only
                    // narrow): not offered.
                    b'r' | b'R' if !http => Some((true, Some(SuggestTarget::Repo))),
                    b'd' | b'D' | b'n' | b'N' => Some((false, None)),
                    _ => None,
                };
                match choice {
                    Some(_) if armed.drawn.is_none() => armed.early = true,
                    Some(_) if !armed.fits => self.armed = None,
                    Some(_)
                        if armed
                            .drawn
                            .is_some_and(|at| now.saturating_duration_since(at) < READ_FIRST) =>
                    {
                        armed.early = true
                    }
                    Some((allow, save)) => {
                        let id = armed.question.id;
                        // Taken off at once: the next question shows while the guard answers.
                        self.pending.retain(|p| p.id != id);
                        self.armed = None;
                        answer = Some(Answer { id, allow, save });
                    }
                    None => {
                        if byte == ANSWER_KEY {
                            passed.push(ANSWER_KEY);
                        } else if byte == 0x1b {
                            swallow = Swallow::Escape;
                        }
                        self.armed = None;
                    }
                }
                continue;
            }
            if let (ANSWER_KEY, Some(first)) = (byte, self.pending.first()) {
                self.armed = Some(Armed {
                    question: first.clone(),
                    at: now,
                    drawn: None,
                    fits: false,
                    early: false,
                });
                self.dirty = true;
                continue;
            }
            passed.push(byte);
        }
        (passed, answer)
    }

    /// The row's text, at most `cols` characters, and whether an armed question fits it
    /// whole.
    fn text(&self, now: Instant, cols: usize) -> (String, bool) {
        let room = cols.saturating_sub(1);
        let cut = |text: String| text.chars().take(room).collect::<String>();
        if let Some(armed) = &self.armed {
            let q = &armed.question;
            let name = crate::commands::firewall::question(q);
            let (asks, keys) = if q.what == "http" {
                (
                    "send",
                    "a once · s save to your config · d refuse · other keys: back",
                )
            } else {
                (
                    "look up",
                    "a once · s save to your config · r save to devcontainer.json · d refuse · other keys: back",
                )
            };
            let head = format!("yolo: let the agent {asks} {name}?");
            if head.chars().count() > room {
                return (
                    cut(format!("yolo: this question is too long for the row: answer it with `yolo approvals{}` in another terminal · any key: back", self.flag)),
                    false,
                );
            }
            let early = if armed.early {
                " (read it, then press the key again)"
            } else {
                ""
            };
            return (cut(format!("{head}{early} {keys}")), true);
        }
        let text = match (self.pending.first(), &self.note) {
            (_, Some((note, until))) if *until > now => format!("yolo: {note}"),
            (Some(q), _) => {
                let more = match self.pending.len() - 1 {
                    0 => String::new(),
                    n => format!(" (+{n} more)"),
                };
                let asks = if q.what == "http" { "asks" } else { "looks up" };
                format!(
                    "yolo: the agent {asks} {}{more}, refused in {}s · Ctrl-] to answer",
                    crate::commands::firewall::question(q),
                    q.expires_secs
                )
            }
            (None, _) => String::new(),
        };
        (cut(text), false)
    }

    fn wanted(&self, now: Instant) -> bool {
        self.armed.is_some()
            || !self.pending.is_empty()
            || self.note.as_ref().is_some_and(|(_, until)| *until > now)
    }

    /// Nothing answered `Ctrl-]` in time, or its question is no longer held: back to the
    /// agent, with a word why.
    fn disarm_if_stale(&mut self, now: Instant) {
        let Some(armed) = &self.armed else { return };
        let why = if now.saturating_duration_since(armed.at) >= ARMED_FOR {
            "no answer key: back to the agent"
        } else if !self.pending.iter().any(|p| p.id == armed.question.id) {
            "that question is no longer held (answered elsewhere, or its time ran out)"
        } else {
            return;
        };
        self.armed = None;
        self.dirty = true;
        self.note = Some((why.into(), now + NOTE_FOR));
    }
}

/// The row drawn: the scrolling region above it, the row itself in reverse video, the cursor
/// where it was. The agent may have left the terminal in any state its output can set; what
/// would move or hide the row is reset first, after the cursor is saved (DECSC saves origin
/// mode, the character sets and the attributes, and DECRC gives the agent them back): origin
/// mode (which would put the row inside the scrolling region), a double-width line (half the
/// row shown), the attributes (concealed or invisible text) and the character set (line
/// drawing in place of letters).
fn frame(text: &str, rows: u16) -> String {
    format!(
        "\x1b7\x1b[?6l\x1b[1;{}r\x1b[{rows};1H\x1b#5\x1b[0m\x1b(B\x0f\x1b[2K\x1b[7m{text}\x1b[0m\x1b8",
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
            state: Mutex::new(State {
                flag: located.flag(),
                ..State::default()
            }),
            changed: Notify::new(),
            answers,
            task: Mutex::new(None),
        });
        let every = if crate::engine::remote::engine_is_remote() {
            Duration::from_secs(5)
        } else {
            Duration::from_secs(1)
        };
        let (engine, located, me) = (engine.clone(), located.clone(), prompt.clone());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            let mut asked = Instant::now() - every;
            let mut failed = 0;
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
                    match engine.control(&guard, &Request::Pending).await {
                        Ok(response) => {
                            failed = 0;
                            me.state().pending = response.pending;
                        }
                        // A slow or busy engine may miss one; several in a row, the guard is
                        // gone (the session ended): nothing more to ask.
                        Err(_) if failed + 1 < GONE_AFTER => failed += 1,
                        Err(_) => {
                            let mut state = me.state();
                            state.pending.clear();
                            state.armed = None;
                            drop(state);
                            me.draw();
                            return;
                        }
                    }
                }
                me.state().disarm_if_stale(Instant::now());
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
            let (text, fits) = state.text(now, cols as usize);
            let changed = text != state.drawn || state.drawn_size != (cols, rows);
            let fresh = !state.shown || changed || state.dirty;
            if !state.shown {
                state.shown = true;
                self.changed.notify_one();
            }
            if state.armed.is_some() {
                // At once, but never inside a chunk of the agent's output (held back from
                // now on: `may_write`).
                if state.writing {
                    return;
                }
                let armed = state.armed.as_mut().expect("armed");
                if !(fresh || armed.drawn.is_none()) {
                    return;
                }
                if changed || armed.drawn.is_none() {
                    armed.drawn = Some(now);
                }
                armed.fits = fits;
            } else {
                let quiet = state.last_output.is_none_or(|t| t.elapsed() >= QUIET)
                    || state.drawn_at.is_none_or(|t| t.elapsed() >= STALE);
                if !(fresh && quiet) {
                    return;
                }
            }
            state.dirty = false;
            state.drawn = text.clone();
            state.drawn_size = (cols, rows);
            state.drawn_at = Some(now);
            frame(&text, rows)
        } else if state.shown {
            state.shown = false;
            state.drawn.clear();
            self.changed.notify_one();
            cleared(rows)
        } else {
            return;
        };
        // Written with the state held: a chunk of the agent's output cannot come between
        // the decision and the row (`may_write` waits for the state).
        let mut stdout = std::io::stdout().lock();
        let _ = stdout
            .write_all(out.as_bytes())
            .and_then(|()| stdout.flush());
        drop(state);
    }

    /// The run is over: the task stopped (waited for, so it draws nothing after this) and
    /// the row given back.
    pub(crate) async fn finish(&self) {
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            task.abort();
            let _ = task.await;
        }
        let mut state = self.state();
        state.pending.clear();
        state.armed = None;
        state.note = None;
        drop(state);
        self.draw();
    }
}

impl Overlay for Prompt {
    fn input(&self, input: &[u8]) -> Vec<u8> {
        let (passed, answer, armed) = {
            let mut state = self.state();
            let (passed, answer) = state.take_keys(input, Instant::now());
            (passed, answer, state.armed.is_some())
        };
        if let Some(answer) = answer {
            let _ = self.answers.send(answer);
        }
        if armed || answer.is_some() {
            self.draw();
        }
        passed
    }

    fn may_write(&self) -> bool {
        let mut state = self.state();
        if state.armed.is_some() {
            return false;
        }
        state.writing = true;
        true
    }

    fn output(&self) {
        let mut state = self.state();
        state.writing = false;
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
            query: None,
        }
    }

    /// The armed row as `draw` leaves it: drawn at `at`, fitting or not.
    fn drawn(state: &mut State, at: Instant, fits: bool) {
        let armed = state.armed.as_mut().expect("armed");
        armed.drawn = Some(at);
        armed.fits = fits;
    }

    #[test]
    fn keys_pass_unless_a_question_is_shown_and_ctrl_bracket_comes_first() {
        let t0 = Instant::now();
        let later = t0 + READ_FIRST + Duration::from_millis(1);
        let mut state = State::default();
        // Nothing asked: even Ctrl-] is the agent's.
        assert_eq!(state.take_keys(b"ab\x1dd", t0), (b"ab\x1dd".to_vec(), None));
        state.pending = vec![question(7, "x.test"), question(8, "y.test")];
        // Plain keys are the agent's while a question is shown.
        assert_eq!(state.take_keys(b"asrd", t0), (b"asrd".to_vec(), None));
        // Ctrl-] then s at once: nothing answered, the row not yet drawn; the key is not the
        // agent's either.
        let (passed, answer) = state.take_keys(b"hi\x1ds", t0);
        assert_eq!((passed.as_slice(), answer), (&b"hi"[..], None));
        assert!(state.armed.as_ref().unwrap().early);
        // Drawn, and read for a second: s allows and saves the question drawn.
        drawn(&mut state, t0, true);
        assert_eq!(state.take_keys(b"s", t0).1, None, "too soon");
        let (passed, answer) = state.take_keys(b"s!", later);
        assert_eq!(passed, b"!");
        assert_eq!(
            answer,
            Some(Answer {
                id: 7,
                allow: true,
                save: Some(SuggestTarget::User)
            })
        );
        assert_eq!(state.pending.len(), 1, "the answered one is taken off");
        assert!(state.armed.is_none());
        // Split over two reads, and d refuses.
        assert_eq!(state.take_keys(b"\x1d", t0), (Vec::new(), None));
        drawn(&mut state, t0, true);
        assert_eq!(
            state.take_keys(b"d", later).1,
            Some(Answer {
                id: 8,
                allow: false,
                save: None
            })
        );
        // Twice sends one to the agent; another key goes back without an answer, and an
        // arrow key's whole sequence with it.
        state.pending = vec![question(9, "z.test")];
        assert_eq!(state.take_keys(b"\x1d\x1d", t0), (vec![ANSWER_KEY], None));
        assert_eq!(state.take_keys(b"\x1d\x1bq", t0), (Vec::new(), None));
        assert_eq!(state.take_keys(b"\x1d\x1b[Ax", t0), (b"x".to_vec(), None));
        assert_eq!(state.take_keys(b"\x1d\x1bOBy", t0), (b"y".to_vec(), None));
        assert_eq!(
            state.take_keys(b"\x1d\x1b[1;5Cz", t0),
            (b"z".to_vec(), None)
        );
        assert_eq!(state.take_keys(b"\x1dq", t0), (Vec::new(), None));
        assert_eq!(state.pending.len(), 1);
        state.take_keys(b"\x1d", t0);
        drawn(&mut state, t0, true);
        assert_eq!(
            state.take_keys(b"r", later).1.map(|a| a.save),
            Some(Some(SuggestTarget::Repo))
        );
        // The answer is for the question drawn at Ctrl-], even if the list changed since.
        state.pending = vec![question(10, "shown.test"), question(11, "next.test")];
        state.take_keys(b"\x1d", t0);
        drawn(&mut state, t0, true);
        state.pending.remove(0);
        assert_eq!(state.take_keys(b"a", later).1.map(|a| a.id), Some(10));
        assert_eq!(state.pending.len(), 1);
        // A question that did not fit the row is not answered here: any key goes back.
        state.take_keys(b"\x1d", t0);
        drawn(&mut state, t0, false);
        assert_eq!(state.take_keys(b"a", later), (Vec::new(), None));
        assert!(state.armed.is_none());
        // A request's rule is not saved to the repository: r goes back.
        state.pending = vec![PendingApproval {
            what: "http".into(),
            ..question(12, "api.test POST /x")
        }];
        state.take_keys(b"\x1d", t0);
        drawn(&mut state, t0, true);
        assert_eq!(state.take_keys(b"r", later), (Vec::new(), None));
        assert!(state.armed.is_none());
    }

    #[test]
    fn a_stale_armed_question_goes_back_to_the_agent() {
        let t0 = Instant::now();
        let mut state = State {
            pending: vec![question(1, "a.test")],
            ..State::default()
        };
        state.take_keys(b"\x1d", t0);
        state.disarm_if_stale(t0);
        assert!(state.armed.is_some());
        state.disarm_if_stale(t0 + ARMED_FOR);
        assert!(state.armed.is_none());
        assert!(state.note.is_some());
        state.take_keys(b"\x1d", t0);
        state.pending.clear();
        state.disarm_if_stale(t0);
        assert!(state.armed.is_none(), "its question is gone");
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
        let (text, _) = state.text(now, 200);
        assert!(text.starts_with("yolo: the agent looks up evil"), "{text}");
        assert!(text.contains("(+1 more)"), "{text}");
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text}");
        assert_eq!(state.text(now, 40).0.chars().count(), 39);
        state.pending.remove(0);
        state.take_keys(b"\x1d", now);
        let (armed, fits) = state.text(now, 200);
        assert!(
            armed.starts_with("yolo: let the agent look up b.test? a once"),
            "{armed}"
        );
        assert!(fits);
        // The armed question comes before an earlier answer's outcome.
        state.note = Some(("allowed c.test".into(), now + NOTE_FOR));
        assert!(state.text(now, 200).0.contains("b.test?"));
        // A request's query is part of what is shown (the rule does not match on it).
        let mut with_query = State {
            pending: vec![PendingApproval {
                what: "http".into(),
                query: Some("leak=1".into()),
                ..question(3, "api.test POST /x")
            }],
            ..State::default()
        };
        with_query.take_keys(b"\x1d", now);
        assert!(
            with_query.text(now, 200).0.starts_with(
                "yolo: let the agent send api.test POST /x (query ?leak=1; any query passes)?"
            ),
            "{:?}",
            with_query.text(now, 200)
        );
        // ATTACK: a query of wide, blank or direction-changing characters (which would draw
        // past the row's end, over its start) is shown one column a character, escaped.
        with_query.armed.as_mut().unwrap().question.query =
            Some("\u{ff41}\u{2800}yolo:\u{202e}".into());
        let (escaped, _) = with_query.text(now, 200);
        assert!(
            escaped.contains("(query ?%EF%BD%81%E2%A0%80yolo:%E2%80%AE; any query passes)?"),
            "{escaped}"
        );
        assert!(
            escaped.split("? a once").next().unwrap().is_ascii(),
            "{escaped}"
        );
        // Too narrow for the whole question: not offered here.
        let (narrow, fits) = state.text(now, 30);
        assert!(!fits);
        assert!(narrow.starts_with("yolo: this question is too"), "{narrow}");
        state.armed = None;
        assert_eq!(state.text(now, 200).0, "yolo: allowed c.test");
        state.pending.clear();
        assert!(state.wanted(now), "the outcome stays a moment");
        assert!(!state.wanted(now + NOTE_FOR));
    }

    #[test]
    fn the_row_keeps_the_agents_cursor_and_scrolls_nothing_over_it() {
        let drawn = frame("hello", 24);
        assert!(drawn.starts_with("\x1b7") && drawn.ends_with("\x1b8"));
        assert!(drawn.contains("\x1b[1;23r") && drawn.contains("\x1b[24;1H"));
        // ATTACK: what the agent set before is undone for the row, origin mode first (it
        // moves the row); the e2e test reads the screen.
        let reset = drawn.find("\x1b[?6l").unwrap();
        assert!(reset < drawn.find("\x1b[24;1H").unwrap());
        for undone in ["\x1b#5", "\x1b[0m\x1b(B\x0f"] {
            let at = drawn.find(undone).unwrap_or_else(|| panic!("{undone:?}"));
            assert!(at < drawn.find("hello").unwrap());
        }
        let gone = cleared(24);
        assert!(gone.contains("\x1b[r") && gone.contains("\x1b[24;1H\x1b[2K"));
    }
}
