//! `yolo watch`: one live view of a session (ratatui): the questions the guard holds for an
//! answer on top (answered with keys), then what the agent runs, changes and contacts, as it
//! happens, with counts; refusals and sensitive files first. It reads the same files as
//! `yolo audit` (so it works against a detached run, and after the session ended as a browser
//! of its log) and asks the guard's control socket for the held questions, as `yolo
//! approvals` does. `--once` prints the screen once, 80×24, and exits (scripts, tests).

pub(crate) mod model;
pub(crate) mod prompt;
pub(crate) mod view;

use crate::audit::reader::Tail;
use crate::cli::{SuggestTarget, Target};
use crate::error::Result;
use crate::firewall::control::Request;
use model::Model;
use std::time::{Duration, Instant};
use view::Screen;
use yolo_protocol::control::PendingApproval;

/// The session's events read so far, and the held questions as the guard last listed them.
struct Watched {
    model: Model,
    tail: Tail,
    pending: Vec<PendingApproval>,
    /// The workspace whose guard is asked, found once (`None`: outside one; no questions).
    located: Option<crate::project::Located>,
}

impl Watched {
    fn new(session: &str, target: &Target) -> Watched {
        Watched {
            model: Model::new(session),
            tail: Tail::new(crate::audit::session_files(session)),
            pending: Vec::new(),
            located: crate::project::Located::find(
                target.workspace.as_deref(),
                target.config.as_deref(),
            )
            .ok()
            .map(|l| l.named(target.copy.as_deref())),
        }
    }

    /// The ids of the held questions, to see when the list changed.
    fn ids(&self) -> Vec<u64> {
        self.pending.iter().map(|p| p.id).collect()
    }

    fn read(&mut self) {
        for event in self.tail.poll() {
            self.model.apply(&event);
        }
    }

    /// Ask the guard for its held questions; false when it cannot be asked (no session
    /// running, or no guard).
    async fn refresh(&mut self) -> bool {
        let Some(located) = self.located.as_ref().filter(|_| !self.model.ended) else {
            self.pending.clear();
            return false;
        };
        let asked = crate::session::firewall::request(located, &Request::Pending);
        match tokio::time::timeout(Duration::from_secs(3), asked).await {
            Ok(Ok(response)) => {
                self.pending = response.pending;
                true
            }
            _ => {
                self.pending.clear();
                false
            }
        }
    }
}

/// `yolo watch [--session ID] [--once]`.
pub(crate) async fn run(target: &Target, session: Option<String>, once: bool) -> Result<i32> {
    let session = crate::commands::audit::chosen_session(target, session).await?;
    let mut watched = Watched::new(&session, target);
    watched.read();
    let mut screen = Screen {
        live: watched.refresh().await,
        ..Default::default()
    };
    if once {
        print!(
            "{}",
            view::text(&watched.model, &watched.pending, &screen, 80, 24)
        );
        return Ok(0);
    }
    let mut terminal =
        ratatui::try_init().map_err(|e| crate::error::Error::io("the terminal", e))?;
    let outcome = interact(&mut terminal, &mut watched, &mut screen).await;
    ratatui::restore();
    outcome.map(|()| 0)
}

async fn interact(
    terminal: &mut ratatui::DefaultTerminal,
    watched: &mut Watched,
    screen: &mut Screen,
) -> Result<()> {
    use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
    let mut asked_at = Instant::now();
    // When the list of questions last changed: an answer key right after is not taken (the
    // question under the cursor may not be the one the user read).
    let mut changed_at = Instant::now();
    loop {
        watched.read();
        if asked_at.elapsed() >= Duration::from_secs(1) {
            let before = watched.ids();
            screen.live = watched.refresh().await;
            if watched.ids() != before {
                changed_at = Instant::now();
            }
            asked_at = Instant::now();
        }
        terminal
            .draw(|f| view::draw(f, &watched.model, &watched.pending, screen))
            .map_err(|e| crate::error::Error::io("the terminal", e))?;
        let ready = tokio::task::block_in_place(|| event::poll(Duration::from_millis(200)))
            .unwrap_or(false);
        if !ready {
            continue;
        }
        let Ok(Event::Key(key)) = event::read() else {
            continue;
        };
        if key.kind != KeyEventKind::Press {
            continue;
        }
        let answer = |allow: bool, save: Option<SuggestTarget>| (allow, save);
        let decision = match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => return Ok(()),
            KeyCode::Tab => {
                screen.tab = (screen.tab + 1) % view::TABS.len();
                screen.scroll = 0;
                None
            }
            KeyCode::Char(c @ '1'..='3') => {
                screen.tab = usize::from(c as u8 - b'1');
                screen.scroll = 0;
                None
            }
            KeyCode::Up if !watched.pending.is_empty() => {
                let at = view::selected(&watched.pending, screen.question).saturating_sub(1);
                screen.question = Some(watched.pending[at].id);
                None
            }
            KeyCode::Down if !watched.pending.is_empty() => {
                let at = (view::selected(&watched.pending, screen.question) + 1)
                    .min(watched.pending.len() - 1);
                screen.question = Some(watched.pending[at].id);
                None
            }
            KeyCode::Up | KeyCode::PageUp => {
                screen.scroll = screen.scroll.saturating_sub(10);
                None
            }
            KeyCode::Down | KeyCode::PageDown => {
                screen.scroll += 10;
                None
            }
            KeyCode::Char('a') => Some(answer(true, None)),
            KeyCode::Char('s') => Some(answer(true, Some(SuggestTarget::User))),
            KeyCode::Char('d') => Some(answer(false, None)),
            _ => None,
        };
        let Some((allow, save)) = decision else {
            continue;
        };
        if changed_at.elapsed() < Duration::from_secs(1) {
            screen.status =
                "the questions just changed: look again, then press the key again".into();
            continue;
        }
        let Some(question) = watched
            .pending
            .get(view::selected(&watched.pending, screen.question))
        else {
            screen.status = "no question is waiting".into();
            continue;
        };
        let Some(located) = watched.located.as_ref() else {
            continue;
        };
        let via = match (allow, save) {
            (true, None) => "yolo watch, key a",
            (true, Some(_)) => "yolo watch, key s",
            (false, _) => "yolo watch, key d",
        };
        screen.status =
            match crate::commands::firewall::answer(located, question.id, allow, save, via).await {
                Ok(said) => said.join("; "),
                Err(e) => e.to_string(),
            };
        screen.live = watched.refresh().await;
        asked_at = Instant::now();
    }
}
