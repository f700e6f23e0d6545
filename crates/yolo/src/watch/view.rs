//! How `yolo watch` draws its model (ratatui): the session and its counts on top, the
//! questions waiting for an answer under them, then one list at a time (programs, files,
//! network and HTTP), refusals and sensitive files first, and the keys at the bottom. Fits an
//! 80×24 terminal.

use super::model::{Model, Row};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, ListState, Paragraph, Tabs};
use ratatui::Frame;
use yolo_protocol::control::PendingApproval;

/// The lists, in tab order.
pub(crate) const TABS: [&str; 3] = ["1 Programs", "2 Files", "3 Network"];

/// What the user has chosen on screen.
#[derive(Debug, Default)]
pub(crate) struct Screen {
    pub(crate) tab: usize,
    /// The selected question, by id (an index would move to another question when one above
    /// it ends, which the agent can time).
    pub(crate) question: Option<u64>,
    /// How far the list is scrolled (rows from the newest).
    pub(crate) scroll: usize,
    /// The last thing a key did (or why it could not).
    pub(crate) status: String,
    /// The guard answers questions for this session (its control socket is reachable).
    pub(crate) live: bool,
}

pub(crate) fn draw(frame: &mut Frame, model: &Model, pending: &[PendingApproval], screen: &Screen) {
    let questions = if pending.is_empty() {
        1
    } else {
        pending.len().min(4) as u16 + 2
    };
    let [header, counts, asked, tabs, list, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(questions),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());

    let state = if model.ended {
        "ended (browsing its log)"
    } else {
        "open"
    };
    let network = if model.network.is_empty() {
        "?"
    } else {
        &model.network
    };
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled("yolo watch ", Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(format!("{}  network {network}  {state}", model.session)),
        ])),
        header,
    );
    frame.render_widget(Paragraph::new(model.counts_line()), counts);

    if pending.is_empty() {
        let text = if screen.live {
            "no question waits for your answer"
        } else {
            "questions: none (the session's guard is not running)"
        };
        frame.render_widget(
            Paragraph::new(text).style(Style::new().fg(Color::DarkGray)),
            asked,
        );
    } else {
        let items: Vec<ListItem> = pending
            .iter()
            .map(|p| {
                // The registrable domain first: a long name cut at the edge still shows whose
                // it is. An `http` question is `HOST METHOD /path`: the host's domain.
                let name = crate::commands::firewall::question(p);
                let host = p.name.split(' ').next().unwrap_or_default();
                let domain = psl::domain_str(host).unwrap_or(host);
                let qtype = if p.qtype.is_empty() {
                    String::new()
                } else {
                    format!("{}, ", p.qtype)
                };
                ListItem::new(format!(
                    "{:>3} {} [{}] {name} ({qtype}{} waiting, {}s left)",
                    p.id,
                    crate::visible::escape_controls(&p.what),
                    crate::visible::escape_controls(domain),
                    p.waiting,
                    p.expires_secs
                ))
            })
            .collect();
        let selected = selected(pending, screen.question);
        let mut state = ListState::default().with_selected(Some(selected));
        frame.render_stateful_widget(
            List::new(items)
                .block(
                    Block::default()
                        .borders(Borders::ALL)
                        .title(" waiting for you: a allow, s allow+save, d deny ")
                        .border_style(Style::new().fg(Color::Yellow)),
                )
                .highlight_style(Style::new().add_modifier(Modifier::REVERSED)),
            asked,
            &mut state,
        );
    }

    frame.render_widget(
        Tabs::new(TABS)
            .select(screen.tab)
            .highlight_style(Style::new().add_modifier(Modifier::REVERSED)),
        tabs,
    );

    let (first, second): (
        &std::collections::VecDeque<Row>,
        &std::collections::VecDeque<Row>,
    ) = match screen.tab {
        0 => (&model.programs, &EMPTY),
        1 => (&model.sensitive_files, &model.files),
        _ => (&model.refusals, &model.network_log),
    };
    let rows: Vec<ListItem> = first
        .iter()
        .chain(second.iter())
        .skip(screen.scroll)
        .map(|r| {
            let style = if r.warn {
                Style::new().fg(Color::Red)
            } else {
                Style::new()
            };
            ListItem::new(Line::from(vec![
                Span::styled(format!("{} ", r.time), Style::new().fg(Color::DarkGray)),
                Span::styled(r.text.clone(), style),
            ]))
        })
        .collect();
    let empty = rows.is_empty();
    let block = Block::default().borders(Borders::TOP);
    if empty {
        frame.render_widget(Paragraph::new("nothing yet").block(block), list);
    } else {
        frame.render_widget(List::new(rows).block(block), list);
    }

    let help = if screen.status.is_empty() {
        "q quit  tab/1-3 list  up/down scroll  a/s/d answer a question".to_string()
    } else {
        screen.status.clone()
    };
    frame.render_widget(
        Paragraph::new(help).style(Style::new().fg(Color::DarkGray)),
        keys,
    );
}

static EMPTY: std::collections::VecDeque<Row> = std::collections::VecDeque::new();

/// The index of question `id` in `pending`, or the first.
pub(crate) fn selected(pending: &[PendingApproval], id: Option<u64>) -> usize {
    id.and_then(|id| pending.iter().position(|p| p.id == id))
        .unwrap_or(0)
}

/// The screen drawn once into a `width`×`height` buffer, as text lines (`yolo watch --once`).
pub(crate) fn text(
    model: &Model,
    pending: &[PendingApproval],
    screen: &Screen,
    width: u16,
    height: u16,
) -> String {
    let backend = ratatui::backend::TestBackend::new(width, height);
    let Ok(mut terminal) = ratatui::Terminal::new(backend);
    let _ = terminal.draw(|f| draw(f, model, pending, screen));
    let buffer = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buffer.area.height {
        let mut line = String::new();
        for x in 0..buffer.area.width {
            line.push_str(buffer[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_80_by_24_screen_holds_the_counts_the_questions_and_a_list() {
        let mut model = Model::new("20261128T010203Z-abc");
        model.network = "firewall".into();
        model.refusals.push_front(Row {
            time: "01:02:03".into(),
            text: "dns evil.test refused".into(),
            warn: true,
        });
        let pending = vec![PendingApproval {
            id: 7,
            what: "dns".into(),
            name: "pypi.org".into(),
            qtype: "A".into(),
            asked: chrono::Utc::now(),
            expires_secs: 25,
            waiting: 2,
            query: None,
        }];
        let screen = Screen {
            tab: 2,
            live: true,
            ..Default::default()
        };
        let shown = text(&model, &pending, &screen, 80, 24);
        assert_eq!(shown.lines().count(), 24);
        assert!(shown.lines().all(|l| l.chars().count() <= 80));
        assert!(shown.contains("network firewall  open"), "{shown}");
        assert!(
            shown.contains("7 dns [pypi.org] pypi.org (A, 2 waiting, 25s left)"),
            "{shown}"
        );
        assert!(shown.contains("dns evil.test refused"), "{shown}");
        assert!(shown.contains("q quit"), "{shown}");
    }
}
