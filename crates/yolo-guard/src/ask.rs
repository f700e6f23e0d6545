//! Approve as you go (`[firewall] on_refused = "ask"`): what the guard would refuse is held,
//! not refused, while the user is asked (`yolo approvals`, `yolo allow --pending ID`, `yolo
//! deny --pending ID`, `yolo run`'s prompt, over the host's control socket, which the agent
//! cannot reach). Two kinds of question:
//! - `dns`: a lookup of a name outside the allowlist (the forwarder holds it). An allow puts
//!   the name in the allowlist.
//! - `http`: a request to an inspected host that its method/path rules refuse (the proxy holds
//!   it, its body unread). The question is the rule that would let exactly it through,
//!   `HOST METHOD /path` (no wildcard: a path or method with `*` is not offered), and an allow
//!   adds that rule, as `yolo allow --http` does.
//!
//! Lookups of a name (requests of a rule) already held wait on the same question. Unanswered
//! within the timeout, they are refused as without `ask`.
//!
//! What the agent could do with it is bounded: at most [`MAX_PENDING`] questions are held at
//! once and [`MAX_WAITING`] lookups and requests wait in all; past either, they are refused at
//! once, as without `ask` (a flood of made-up names fills the user's list no further and holds
//! no more of the guard's memory). Nothing held is sent upstream until the user allows it.
//! Every question and its end is an `approval` record: asked, then allowed or denied (with
//! who and how) or timed out.

use crate::audit::events::Events;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use yolo_protocol::control::PendingApproval;
use yolo_protocol::event::EventKind;

/// Names held at once at most.
pub const MAX_PENDING: usize = 32;
/// Lookups waiting at once at most (all names).
pub const MAX_WAITING: usize = 256;

/// The held questions of one guard.
pub struct Approvals {
    timeout: Duration,
    events: Arc<Events>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    pending: BTreeMap<u64, Pending>,
    waiting: usize,
}

struct Pending {
    /// `dns` or `http`.
    what: &'static str,
    name: String,
    qtype: String,
    asked: chrono::DateTime<chrono::Utc>,
    deadline: Instant,
    waiters: Vec<oneshot::Sender<bool>>,
    /// `http`: the first held request's query string, cut to [`MAX_QUERY`] characters.
    query: Option<String>,
}

/// The most of a held request's query string a question shows.
const MAX_QUERY: usize = 200;

/// A question off the list, being answered.
pub struct Taken {
    id: u64,
    pending: Pending,
}

impl Taken {
    pub fn name(&self) -> &str {
        &self.pending.name
    }

    /// `dns` or `http`.
    pub fn what(&self) -> &'static str {
        self.pending.what
    }
}

/// The longest request line offered as a question (longer ones are refused at once).
const MAX_RULE: usize = 1024;

/// The rule a held request's question offers, `HOST METHOD /path`, when it allows exactly
/// that request: a plain host name (with `:port` off the HTTPS port), no `*` in the method or
/// the path (which the rule grammar reads as a wildcard), and nothing but printable ASCII.
/// `None`: not offered (the request is refused at once).
pub fn http_question(host: &str, method: &str, path: &str) -> Option<String> {
    let rule = format!("{host} {method} {path}");
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.parse::<u16>().is_ok_and(|p| p != 0) => name,
        _ => host,
    };
    let plain = yolo_protocol::allowlist::plain_host_name(name)
        && !method.contains('*')
        && !path.contains('*')
        && path.starts_with('/')
        && rule.len() <= MAX_RULE
        // Printable ASCII only: what the user reads is then what is allowed, one column a
        // character (no look-alike, blank, wide or direction-changing character).
        && rule.bytes().all(|b| b == b' ' || b.is_ascii_graphic());
    let (parsed_host, parsed) = yolo_protocol::http::parse_host_rule(&rule).ok()?;
    (plain && parsed_host == host && parsed.to_string() == format!("{method} {path}"))
        .then_some(rule)
}

/// What a held lookup or request waits on: [`Held::wait`] for the answer. Its place among
/// the [`MAX_WAITING`] is given back when it is dropped, however that happens: answered, timed
/// out, or the wait itself dropped (the client reset its HTTP/2 stream or went away), so a
/// client that gives up holds nothing.
pub struct Held {
    pub id: u64,
    answer: oneshot::Receiver<bool>,
    pub deadline: Instant,
    approvals: Arc<Approvals>,
}

impl Held {
    /// `true` once allowed; `false` when denied or unanswered by the deadline (the question is
    /// then refused for all who wait on it, and recorded as timed out).
    pub async fn wait(mut self) -> bool {
        let deadline = tokio::time::Instant::from_std(self.deadline);
        matches!(
            tokio::time::timeout_at(deadline, &mut self.answer).await,
            Ok(Ok(true))
        )
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        {
            let mut state = self.approvals.lock();
            state.waiting = state.waiting.saturating_sub(1);
        }
        if self.deadline <= Instant::now() {
            self.approvals.expire(self.id);
        }
    }
}

impl Approvals {
    pub fn new(timeout: Duration, events: Arc<Events>) -> Approvals {
        Approvals {
            timeout,
            events,
            state: Mutex::new(State {
                next_id: 1,
                ..Default::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hold a lookup of `name`: a new question, or a wait on the one already asked. `None`:
    /// over the limits, refuse it now.
    pub fn ask(self: &Arc<Self>, name: &str, qtype: &str) -> Option<Held> {
        // Only a plain host name is offered: an allow adds it to the allowlist as it is, and a
        // name like `*.com` would be a wildcard there.
        if !yolo_protocol::allowlist::plain_host_name(name) {
            return None;
        }
        self.hold("dns", name, qtype, None)
    }

    /// Hold a request its host's rules refuse: the question is `rule` ([`http_question`]);
    /// `query`, the request's query string, is shown with it (the rule matches the path
    /// alone).
    pub fn ask_http(self: &Arc<Self>, rule: &str, query: Option<&str>) -> Option<Held> {
        let query = query
            .filter(|q| !q.is_empty())
            .map(|q| q.chars().take(MAX_QUERY).collect());
        self.hold("http", rule, "", query)
    }

    fn hold(
        self: &Arc<Self>,
        what: &'static str,
        name: &str,
        qtype: &str,
        query: Option<String>,
    ) -> Option<Held> {
        self.purge();
        let mut state = self.lock();
        if state.waiting >= MAX_WAITING {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        if let Some((id, pending)) = state
            .pending
            .iter_mut()
            .find(|(_, p)| p.what == what && p.name == name)
        {
            pending.waiters.retain(|w| !w.is_closed());
            pending.waiters.push(tx);
            let (id, deadline) = (*id, pending.deadline);
            state.waiting += 1;
            return Some(self.held(id, rx, deadline));
        }
        if state.pending.len() >= MAX_PENDING {
            return None;
        }
        let id = state.next_id;
        state.next_id += 1;
        let deadline = Instant::now() + self.timeout;
        state.pending.insert(
            id,
            Pending {
                what,
                name: name.to_string(),
                qtype: qtype.to_string(),
                asked: chrono::Utc::now(),
                deadline,
                waiters: vec![tx],
                query,
            },
        );
        state.waiting += 1;
        drop(state);
        self.record(id, what, name, "asked", None, None);
        Some(self.held(id, rx, deadline))
    }

    fn held(self: &Arc<Self>, id: u64, answer: oneshot::Receiver<bool>, deadline: Instant) -> Held {
        Held {
            id,
            answer,
            deadline,
            approvals: Arc::clone(self),
        }
    }

    /// The question `id` ran out of time: refused, said once.
    fn expire(&self, id: u64) {
        let gone = {
            let mut state = self.lock();
            match state.pending.get(&id) {
                Some(p) if p.deadline <= Instant::now() => state.pending.remove(&id),
                _ => None,
            }
        };
        if let Some(pending) = gone {
            self.timed_out(id, pending);
        }
    }

    /// Every question past its deadline, refused: those whose waits all went away before it
    /// are ended here, so none stays on the list (nor holds a place among the
    /// [`MAX_PENDING`]).
    fn purge(&self) {
        let now = Instant::now();
        let gone: Vec<(u64, Pending)> = {
            let mut state = self.lock();
            let due: Vec<u64> = state
                .pending
                .iter()
                .filter(|(_, p)| p.deadline <= now)
                .map(|(id, _)| *id)
                .collect();
            due.into_iter()
                .filter_map(|id| Some((id, state.pending.remove(&id)?)))
                .collect()
        };
        for (id, pending) in gone {
            self.timed_out(id, pending);
        }
    }

    fn timed_out(&self, id: u64, pending: Pending) {
        for waiter in pending.waiters {
            let _ = waiter.send(false);
        }
        self.record(id, pending.what, &pending.name, "timed_out", None, None);
    }

    /// The questions held now.
    pub fn list(&self) -> Vec<PendingApproval> {
        self.purge();
        let now = Instant::now();
        self.lock()
            .pending
            .iter()
            .map(|(id, p)| view(*id, p, now))
            .collect()
    }

    /// Take question `id` off the list for an answer (so it cannot time out meanwhile);
    /// `None`: no such question held (answered, or timed out). Then [`Approvals::answer`].
    pub fn take(&self, id: u64) -> Option<Taken> {
        self.purge();
        let pending = self.lock().pending.remove(&id)?;
        Some(Taken { id, pending })
    }

    /// Answer a taken question: its lookups go on (`allow`; the caller has allowed the name
    /// first) or are refused; the record says who and how.
    pub fn answer(&self, taken: Taken, allow: bool, by: &str, how: &str) -> PendingApproval {
        let Taken { id, pending } = taken;
        let shown = view(id, &pending, Instant::now());
        for waiter in pending.waiters {
            let _ = waiter.send(allow);
        }
        let how = (allow && !how.is_empty()).then(|| how.to_string());
        self.record(
            id,
            pending.what,
            &pending.name,
            if allow { "allowed" } else { "denied" },
            Some(by.to_string()),
            how,
        );
        shown
    }

    /// [`Approvals::take`] and [`Approvals::answer`] at once.
    #[cfg(test)]
    pub fn decide(&self, id: u64, allow: bool, by: &str, how: &str) -> Option<PendingApproval> {
        let taken = self.take(id)?;
        Some(self.answer(taken, allow, by, how))
    }

    fn record(
        &self,
        id: u64,
        what: &str,
        name: &str,
        decision: &str,
        by: Option<String>,
        how: Option<String>,
    ) {
        self.events.emit(EventKind::Approval {
            id,
            what: what.into(),
            name: name.to_string(),
            decision: decision.into(),
            by,
            how,
        });
    }
}

fn view(id: u64, p: &Pending, now: Instant) -> PendingApproval {
    PendingApproval {
        id,
        what: p.what.into(),
        name: p.name.clone(),
        qtype: p.qtype.clone(),
        asked: p.asked,
        expires_secs: p.deadline.saturating_duration_since(now).as_secs(),
        // Those whose client is still there.
        waiting: p.waiters.iter().filter(|w| !w.is_closed()).count() as u32,
        query: p.query.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approvals(timeout: Duration) -> Arc<Approvals> {
        let (events, rx) = Events::channel();
        std::mem::forget(rx); // the records are not what these tests check
        Arc::new(Approvals::new(timeout, events))
    }

    #[tokio::test]
    async fn lookups_of_one_name_share_a_question_and_an_allow_lets_them_all_go() {
        let a = approvals(Duration::from_secs(30));
        let first = a.ask("x.test", "A").unwrap();
        let first_id = first.id;
        let second = a.ask("x.test", "AAAA").unwrap();
        assert_eq!(first.id, second.id);
        assert_eq!(a.list().len(), 1);
        assert_eq!(a.list()[0].waiting, 2);
        let decided = a.decide(first.id, true, "me", "session").unwrap();
        assert_eq!(decided.name, "x.test");
        assert!(first.wait().await);
        assert!(second.wait().await);
        assert!(a.list().is_empty());
        assert!(
            a.decide(first_id, false, "me", "").is_none(),
            "answered once"
        );
        assert!(
            a.ask("*.test", "A").is_none(),
            "a wildcard is never offered"
        );
        assert!(a.ask("localhost", "A").is_none());
        assert!(
            a.ask("169.254.169.254", "A").is_none(),
            "an address is never offered"
        );
        assert!(a.ask("10.0.0.1.", "A").is_none());
    }

    #[tokio::test]
    async fn a_denied_or_expired_question_refuses_its_lookups() {
        let a = approvals(Duration::from_millis(10));
        let held = a.ask("y.test", "A").unwrap();
        a.decide(held.id, false, "me", "").unwrap();
        assert!(!held.wait().await);
        let held = a.ask("z.test", "A").unwrap();
        a.expire(held.id); // too early: still held
        assert_eq!(a.list().len(), 1);
        assert!(!held.wait().await, "unanswered by the deadline");
        assert!(a.list().is_empty());
    }

    #[tokio::test]
    async fn a_held_request_asks_for_exactly_its_rule_and_shares_the_limits() {
        let a = approvals(Duration::from_secs(30));
        let rule = http_question("api.test", "POST", "/v1/files").unwrap();
        assert_eq!(rule, "api.test POST /v1/files");
        let long = "x".repeat(MAX_QUERY + 50);
        let first = a.ask_http(&rule, Some(&format!("token={long}"))).unwrap();
        let second = a.ask_http(&rule, Some("other=1")).unwrap();
        // The question shows the first request's query, cut.
        let shown = a.list()[0].query.clone().unwrap();
        assert!(shown.starts_with("token=xxx"), "{shown}");
        assert_eq!(shown.chars().count(), MAX_QUERY);
        assert_eq!(first.id, second.id, "one question for one rule");
        // A lookup of the same text is another question.
        assert_ne!(a.ask("api.test", "A").unwrap().id, first.id);
        assert_eq!(a.list().iter().filter(|p| p.what == "http").count(), 1);
        let taken = a.take(first.id).unwrap();
        assert_eq!((taken.what(), taken.name()), ("http", rule.as_str()));
        a.answer(taken, true, "me", "session");
        assert!(first.wait().await);
        // Nothing that the rule grammar would read as more than the request is offered.
        for (host, method, path) in [
            ("api.test", "GET", "/v1/*"),
            ("api.test", "GET", "/v1/**"),
            ("api.test", "*", "/v1"),
            ("*.test", "GET", "/"),
            ("10.0.0.1", "GET", "/"),
            ("api.test", "GET", "v1"),
            ("api.test", "GET", "/a\tb"),
            ("api.test", "GET", "/a b"),
            ("api.test", "GET", "/caf\u{e9}"),
            ("api.test", "GET", "/\u{ff41}\u{2800}x"),
            ("api.test", "GET", "/a\u{202e}b"),
        ] {
            assert_eq!(
                http_question(host, method, path),
                None,
                "{host} {method} {path}"
            );
        }
        let long = format!("/{}", "a".repeat(MAX_RULE));
        assert_eq!(http_question("api.test", "GET", &long), None);
        // Off port 443 the rule names the port.
        assert_eq!(
            http_question("api.test:8443", "GET", "/x").as_deref(),
            Some("api.test:8443 GET /x")
        );
        assert_eq!(http_question("api.test:0", "GET", "/x"), None);
        assert_eq!(http_question("api.test:x", "GET", "/x"), None);
    }

    #[test]
    fn a_flood_of_names_is_capped() {
        let a = approvals(Duration::from_secs(30));
        let held: Vec<Held> = (0..MAX_PENDING)
            .map(|i| a.ask(&format!("n{i}.test"), "A").unwrap())
            .collect();
        assert!(a.ask("one-more.test", "A").is_none());
        // More lookups of a held name still wait, up to the total.
        let mut more = Vec::new();
        while let Some(h) = a.ask("n0.test", "A") {
            more.push(h);
        }
        assert_eq!(held.len() + more.len(), MAX_WAITING);
        // Waits that went away (a client that reset its stream) give their places back.
        drop(more);
        assert!(a.ask("n0.test", "A").is_some());
    }

    /// ATTACK: the agent opens held requests and drops them before any answer, over and
    /// over. Each gives its place back at once; a question whose waits all went away is shown
    /// with none waiting, and leaves the list at its deadline, though nobody waits to see it.
    #[tokio::test]
    async fn waits_that_go_away_hold_nothing() {
        let a = approvals(Duration::from_millis(300));
        for _ in 0..MAX_WAITING * 4 {
            let held = a.ask_http("api.test POST /gone", None).expect("a place");
            drop(held);
        }
        assert_eq!(a.lock().waiting, 0);
        let listed = a.list();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].waiting, 0, "{listed:?}");
        // A wait dropped mid-way (its future cancelled) gives its place back too.
        let held = a.ask_http("api.test POST /gone", None).unwrap();
        let _ = tokio::time::timeout(Duration::from_millis(10), held.wait()).await;
        assert_eq!(a.lock().waiting, 0);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(a.list().is_empty(), "ended at its deadline");
        // Questions of names nobody waits on any more cannot fill the list for good.
        for i in 0..MAX_PENDING {
            drop(a.ask(&format!("g{i}.test"), "A").unwrap());
        }
        assert!(a.ask("late.test", "A").is_none(), "the list is full");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(a.ask("late.test", "A").is_some(), "the full list was ended");
    }
}
