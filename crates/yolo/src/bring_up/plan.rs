//! The plan of an `up`, pure: from the containers found and plain options to what to do with
//! each (reuse, start, recreate, create, remove), with the reason in the user's words. No
//! Docker here: `act` carries the plan out.

use crate::engine::{Container, Found};
use crate::firewall::{mode_name, NetworkMode};
use crate::run_spec::ImageSource;
use std::fmt;

/// The network mode of this start: the one asked for, else the one the existing agent container
/// was made for (a `yolo run` after `yolo up --network none` must not quietly turn the network
/// on, nor recreate the container), else the default (firewall).
pub(crate) fn network_mode(asked: Option<NetworkMode>, agent: Option<&Container>) -> NetworkMode {
    asked
        .or_else(|| agent.and_then(|a| a.network))
        .unwrap_or_default()
}

/// What `plan` needs besides the containers found: plain values, no flags.
#[derive(Debug, Clone)]
pub(crate) struct PlanOptions {
    /// The network mode asked for.
    pub(crate) mode: NetworkMode,
    /// Recreate the containers (and rebuild the image).
    pub(crate) rebuild: bool,
    /// The config hash of the RunSpec; an agent made from another is stale.
    pub(crate) config_hash: String,
    /// Whether yolo's state has a session open for the workspace.
    pub(crate) session_open: bool,
}

/// What `up` does with the project's containers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan {
    /// The agent runs in the open session: keep both containers; the guard's allowlist is
    /// brought up to date live.
    Reuse {
        agent: String,
        image: String,
        /// None with `--network none`.
        guard: Option<String>,
        stale: bool,
    },
    /// A new session: the guard starts with this session's config (verified), then the agent.
    Fresh {
        agent: AgentStep,
        guard: GuardStep,
        stale: bool,
    },
}

/// The agent container in a new session.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AgentStep {
    /// Start the existing container, stopped first when it runs (it must not stay up in the
    /// old namespace while its guard restarts).
    Start {
        id: String,
        image: String,
        running: bool,
        reason: Reason,
    },
    /// Remove the existing container, make a new one.
    Recreate { id: String, reason: Reason },
    /// Make the first one.
    Create,
}

/// The guard container in a new session.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GuardStep {
    /// Start the existing guard (stopped first when it runs) so it reads the new config.
    Start { id: String, running: bool },
    /// Remove the existing guard, make a new one.
    Recreate { id: String, reason: Reason },
    /// Make the first one.
    Create,
    /// `--network none` needs no guard: remove it.
    Remove { id: String },
    /// None there and none needed.
    Nothing,
}

/// Why a container is started again or recreated, in the user's words.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reason {
    /// `--rebuild`.
    Rebuild,
    /// The agent was made for another network mode (None: its label is missing or unknown).
    NetworkChanged {
        from: Option<NetworkMode>,
        to: NetworkMode,
    },
    /// The agent's guard is gone: Docker joins a namespace by container id, so a new guard
    /// needs a new agent container.
    GuardMissing,
    /// The agent runs but its guard does not: it has had no network (fail closed).
    GuardDown,
    /// The agent runs but yolo has no open session for it (its state was lost).
    NoSession,
    /// The agent container exists, stopped.
    Stopped,
    /// The guard's agent container is gone: a new one gets a new guard, whose network is
    /// chosen for it.
    AgentMissing,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Rebuild => write!(f, "--rebuild"),
            Reason::NetworkChanged {
                from: Some(from),
                to,
            } => write!(
                f,
                "the network mode changed from {} to {}",
                mode_name(*from),
                mode_name(*to)
            ),
            Reason::NetworkChanged { from: None, to } => {
                write!(f, "the network mode changed to {}", mode_name(*to))
            }
            Reason::GuardMissing => write!(f, "its firewall guard was gone"),
            Reason::GuardDown => write!(f, "its firewall guard was not running"),
            Reason::NoSession => write!(f, "it ran without an open yolo session"),
            Reason::Stopped => write!(f, "it was stopped"),
            Reason::AgentMissing => write!(f, "its agent container was gone"),
        }
    }
}

impl Plan {
    /// created, started or running: what happens to the agent container.
    pub(crate) fn action(&self) -> &'static str {
        match self {
            Plan::Reuse { .. } => "running",
            Plan::Fresh {
                agent: AgentStep::Start { .. },
                ..
            } => "started",
            Plan::Fresh { .. } => "created",
        }
    }

    /// Why the agent is started again or recreated.
    pub(crate) fn reason(&self) -> Option<&Reason> {
        match self {
            Plan::Fresh {
                agent: AgentStep::Start { reason, .. } | AgentStep::Recreate { reason, .. },
                ..
            } => Some(reason),
            _ => None,
        }
    }

    /// The config changed since the agent was made, and the agent is kept.
    pub(crate) fn stale(&self) -> bool {
        match self {
            Plan::Reuse { stale, .. } | Plan::Fresh { stale, .. } => *stale,
        }
    }
}

/// Decide what to do with the containers found, without touching anything.
pub(crate) fn plan(found: &Found, options: &PlanOptions) -> Plan {
    let needs_guard = options.mode != NetworkMode::None;
    let (agent, guard) = (found.agent.as_ref(), found.guard.as_ref());
    if let Some(reason) = reset_reason(agent, options) {
        // Both go: a new agent container needs a new guard and the other way round.
        return Plan::Fresh {
            agent: match agent {
                Some(a) => AgentStep::Recreate {
                    id: a.id.clone(),
                    reason: reason.clone(),
                },
                None => AgentStep::Create,
            },
            guard: guard_step(guard, needs_guard, Some(reason)),
            stale: false,
        };
    }
    let stale = agent.is_some_and(|a| a.config_hash.as_deref() != Some(&options.config_hash));
    let guard_down = needs_guard && !guard.is_some_and(|g| g.running);
    if let Some(a) = agent.filter(|a| a.running && options.session_open && !guard_down) {
        return Plan::Reuse {
            agent: a.id.clone(),
            image: a.image.clone(),
            guard: guard.filter(|_| needs_guard).map(|g| g.id.clone()),
            stale,
        };
    }
    let agent_step = agent.map_or(AgentStep::Create, |a| fresh_agent(a, guard, needs_guard));
    // A new agent container gets a new guard too: the guard's network was chosen for the
    // agent it was made with (network::own_bridge_reason), and this one may hold what that
    // choice excluded (a NET_RAW grant on the bridge other projects share).
    let reset = agent.is_none().then_some(Reason::AgentMissing);
    Plan::Fresh {
        stale: stale && !matches!(agent_step, AgentStep::Recreate { .. }),
        agent: agent_step,
        guard: guard_step(guard, needs_guard, reset),
    }
}

/// Why both containers must be made again, if they must: `--rebuild`, or an agent made for
/// another network mode.
pub(super) fn reset_reason(agent: Option<&Container>, options: &PlanOptions) -> Option<Reason> {
    if options.rebuild {
        return Some(Reason::Rebuild);
    }
    agent
        .filter(|a| a.network != Some(options.mode))
        .map(|a| Reason::NetworkChanged {
            from: a.network,
            to: options.mode,
        })
}

/// The guard in a new session: recreated when `reset` says so, else started (or made).
pub(super) fn guard_step(
    guard: Option<&Container>,
    needs_guard: bool,
    reset: Option<Reason>,
) -> GuardStep {
    match (guard, needs_guard, reset) {
        (Some(g), true, Some(reason)) => GuardStep::Recreate {
            id: g.id.clone(),
            reason,
        },
        (Some(g), true, None) => GuardStep::Start {
            id: g.id.clone(),
            running: g.running,
        },
        (None, true, _) => GuardStep::Create,
        (Some(g), false, _) => GuardStep::Remove { id: g.id.clone() },
        (None, false, _) => GuardStep::Nothing,
    }
}

/// An existing agent in a new session: started again, or recreated when its guard is gone.
pub(super) fn fresh_agent(
    agent: &Container,
    guard: Option<&Container>,
    needs_guard: bool,
) -> AgentStep {
    let guard_gone = needs_guard && guard.is_none();
    let guard_down = needs_guard && !guard.is_some_and(|g| g.running);
    let reason = match (agent.running, guard_down) {
        (true, true) => Reason::GuardDown,
        (true, false) => Reason::NoSession,
        (false, _) if guard_gone => Reason::GuardMissing,
        (false, _) => Reason::Stopped,
    };
    if guard_gone {
        AgentStep::Recreate {
            id: agent.id.clone(),
            reason,
        }
    } else {
        AgentStep::Start {
            id: agent.id.clone(),
            image: agent.image.clone(),
            running: agent.running,
            reason,
        }
    }
}

/// The image as the plan names it: the image's name, or the tag yolo builds it under.
pub(super) fn image_label(source: &ImageSource) -> String {
    match source {
        ImageSource::Image(name) => name.clone(),
        ImageSource::Build(b) => b.tag.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Role;

    const HASH: &str = "hash-now";

    fn container(role: Role, id: &str, running: bool) -> Container {
        Container {
            id: id.into(),
            name: format!("yolo-repo-{id}"),
            role,
            running,
            state: if running { "running" } else { "exited" }.into(),
            status: String::new(),
            image: "img:1".into(),
            devcontainer_id: Some("0abc".into()),
            workspace: Some("/repo".into()),
            config_file: None,
            copy: None,
            config_hash: (role == Role::Agent).then(|| HASH.into()),
            network: (role == Role::Agent).then_some(NetworkMode::Firewall),
            volumes: vec![],
            ports: vec![],
        }
    }

    fn agent(running: bool) -> Option<Container> {
        Some(container(Role::Agent, "a1", running))
    }

    fn guard(running: bool) -> Option<Container> {
        Some(container(Role::Guard, "g1", running))
    }

    /// A case: what was found, and the options (firewall, session open, current hash).
    struct Case {
        found: Found,
        options: PlanOptions,
    }

    fn found(agent: Option<Container>, guard: Option<Container>) -> Case {
        Case {
            found: Found { agent, guard },
            options: PlanOptions {
                mode: NetworkMode::Firewall,
                rebuild: false,
                config_hash: HASH.into(),
                session_open: true,
            },
        }
    }

    impl Case {
        fn mode(mut self, mode: NetworkMode) -> Self {
            self.options.mode = mode;
            self
        }
        fn rebuild(mut self) -> Self {
            self.options.rebuild = true;
            self
        }
        fn no_session(mut self) -> Self {
            self.options.session_open = false;
            self
        }
        fn config_changed(mut self) -> Self {
            self.options.config_hash = "hash-edited".into();
            self
        }
        fn agent_made_for(mut self, network: Option<NetworkMode>) -> Self {
            self.found.agent.as_mut().unwrap().network = network;
            self
        }
        fn plan(&self) -> Plan {
            plan(&self.found, &self.options)
        }
    }

    fn start(running: bool, reason: Reason) -> AgentStep {
        AgentStep::Start {
            id: "a1".into(),
            image: "img:1".into(),
            running,
            reason,
        }
    }

    fn recreate(reason: Reason) -> AgentStep {
        AgentStep::Recreate {
            id: "a1".into(),
            reason,
        }
    }

    fn fresh(agent: AgentStep, guard: GuardStep) -> Plan {
        Plan::Fresh {
            agent,
            guard,
            stale: false,
        }
    }

    #[test]
    fn the_network_mode_asked_for_wins_else_the_containers_is_kept() {
        let mut none = container(Role::Agent, "a1", true);
        none.network = Some(NetworkMode::None);
        assert_eq!(network_mode(None, Some(&none)), NetworkMode::None);
        assert_eq!(
            network_mode(Some(NetworkMode::Open), Some(&none)),
            NetworkMode::Open
        );
        assert_eq!(network_mode(None, None), NetworkMode::Firewall);
        none.network = None; // made by another yolo: the default
        assert_eq!(network_mode(None, Some(&none)), NetworkMode::Firewall);
    }

    #[test]
    fn nothing_yet_creates_the_guard_then_the_agent() {
        let plan = found(None, None).plan();
        assert_eq!(plan, fresh(AgentStep::Create, GuardStep::Create));
        assert_eq!((plan.action(), plan.reason()), ("created", None));
    }

    #[test]
    fn nothing_yet_without_network_creates_no_guard() {
        let plan = found(None, None).mode(NetworkMode::None).plan();
        assert_eq!(plan, fresh(AgentStep::Create, GuardStep::Nothing));
    }

    #[test]
    fn a_running_agent_in_the_open_session_is_reused_with_its_guard() {
        let plan = found(agent(true), guard(true)).plan();
        let reuse = Plan::Reuse {
            agent: "a1".into(),
            image: "img:1".into(),
            guard: Some("g1".into()),
            stale: false,
        };
        assert_eq!(plan, reuse);
        assert_eq!((plan.action(), plan.reason()), ("running", None));
    }

    #[test]
    fn a_changed_config_is_reported_stale_not_recreated() {
        let plan = found(agent(true), guard(true)).config_changed().plan();
        assert!(matches!(plan, Plan::Reuse { stale: true, .. }), "{plan:?}");
        let plan = found(agent(false), guard(false)).config_changed().plan();
        assert!(
            matches!(
                plan,
                Plan::Fresh {
                    stale: true,
                    agent: AgentStep::Start { .. },
                    ..
                }
            ),
            "{plan:?}"
        );
    }

    #[test]
    fn without_network_the_agent_is_reused_alone() {
        let mut case = found(agent(true), None).mode(NetworkMode::None);
        case = case.agent_made_for(Some(NetworkMode::None));
        let plan = case.plan();
        let reuse = Plan::Reuse {
            agent: "a1".into(),
            image: "img:1".into(),
            guard: None,
            stale: false,
        };
        assert_eq!(plan, reuse);
    }

    #[test]
    fn a_stopped_agent_is_started_after_its_guard() {
        let plan = found(agent(false), guard(false)).plan();
        let step = GuardStep::Start {
            id: "g1".into(),
            running: false,
        };
        assert_eq!(plan, fresh(start(false, Reason::Stopped), step));
        assert_eq!(plan.action(), "started");
        assert_eq!(plan.reason().unwrap().to_string(), "it was stopped");
    }

    #[test]
    fn a_running_agent_without_a_session_is_stopped_and_restarted_with_its_guard() {
        let plan = found(agent(true), guard(true)).no_session().plan();
        let step = GuardStep::Start {
            id: "g1".into(),
            running: true,
        };
        assert_eq!(plan, fresh(start(true, Reason::NoSession), step));
    }

    #[test]
    fn a_running_agent_whose_guard_died_is_restarted_with_it() {
        let plan = found(agent(true), guard(false)).plan();
        let step = GuardStep::Start {
            id: "g1".into(),
            running: false,
        };
        assert_eq!(plan, fresh(start(true, Reason::GuardDown), step));
        assert_eq!(
            plan.reason().unwrap().to_string(),
            "its firewall guard was not running"
        );
    }

    #[test]
    fn a_missing_guard_means_a_new_agent_container() {
        // Docker joins a namespace by container id: the old agent cannot join a new guard.
        let plan = found(agent(false), None).plan();
        assert_eq!(
            plan,
            fresh(recreate(Reason::GuardMissing), GuardStep::Create)
        );
        assert_eq!(plan.action(), "created");
        let plan = found(agent(true), None).plan();
        assert_eq!(plan, fresh(recreate(Reason::GuardDown), GuardStep::Create));
        // Recreated from the current config: not stale.
        let plan = found(agent(false), None).config_changed().plan();
        assert!(!plan.stale(), "{plan:?}");
    }

    #[test]
    fn a_missing_agent_means_a_new_guard_too() {
        let plan = found(None, guard(true)).plan();
        assert_eq!(
            plan,
            fresh(
                AgentStep::Create,
                GuardStep::Recreate {
                    id: "g1".into(),
                    reason: Reason::AgentMissing
                }
            )
        );
    }

    #[test]
    fn rebuild_recreates_both() {
        let plan = found(agent(true), guard(true))
            .rebuild()
            .config_changed()
            .plan();
        let step = GuardStep::Recreate {
            id: "g1".into(),
            reason: Reason::Rebuild,
        };
        assert_eq!(plan, fresh(recreate(Reason::Rebuild), step));
        assert_eq!(plan.reason().unwrap().to_string(), "--rebuild");
        // A guard left without its agent goes too.
        let plan = found(None, guard(false)).rebuild().plan();
        let step = GuardStep::Recreate {
            id: "g1".into(),
            reason: Reason::Rebuild,
        };
        assert_eq!(plan, fresh(AgentStep::Create, step));
    }

    #[test]
    fn rebuild_without_network_removes_the_guard() {
        let plan = found(agent(false), guard(false))
            .rebuild()
            .mode(NetworkMode::None)
            .plan();
        let step = GuardStep::Remove { id: "g1".into() };
        assert_eq!(plan, fresh(recreate(Reason::Rebuild), step));
    }

    #[test]
    fn another_network_mode_recreates_both() {
        let plan = found(agent(true), guard(true))
            .mode(NetworkMode::Open)
            .plan();
        let reason = Reason::NetworkChanged {
            from: Some(NetworkMode::Firewall),
            to: NetworkMode::Open,
        };
        let step = GuardStep::Recreate {
            id: "g1".into(),
            reason: reason.clone(),
        };
        assert_eq!(plan, fresh(recreate(reason), step));
        assert_eq!(
            plan.reason().unwrap().to_string(),
            "the network mode changed from firewall to open"
        );
        // An agent without a (known) network label was made by another yolo: recreated.
        let plan = found(agent(true), guard(true)).agent_made_for(None).plan();
        assert_eq!(
            plan.reason(),
            Some(&Reason::NetworkChanged {
                from: None,
                to: NetworkMode::Firewall
            })
        );
    }

    #[test]
    fn without_network_a_stray_guard_is_removed_on_a_new_start() {
        let plan = found(agent(false), guard(true))
            .agent_made_for(Some(NetworkMode::None))
            .mode(NetworkMode::None)
            .plan();
        let step = GuardStep::Remove { id: "g1".into() };
        assert_eq!(plan, fresh(start(false, Reason::Stopped), step));
    }
}
