//! What `yolo status` shows: yolo's containers, and the leftovers of failed or interrupted
//! `up`s (a guard without its agent, a never-started agent, two of something), found by their
//! `dev.yolo.id` label, each with what yolo saved for its workspace.

use crate::engine::{self, Engine, ProjectNetwork, Role};
use crate::error::Result;
use crate::firewall::mode_name;
use crate::output::{self, Leftover, Limits, Network};
use crate::session::state::WorkspaceState;
use std::collections::BTreeSet;

/// A row per agent container yolo made, and one per workspace that has only leftovers. With
/// `allowlists`, each running guard is asked for the allowlist it enforces (a `docker exec`
/// per guard: for `--json`, the table does not show it).
pub(crate) async fn rows(engine: &Engine, allowlists: bool) -> Result<Vec<output::Status>> {
    let mut rows = Vec::new();
    let all = engine.list_managed().await?;
    let networks = engine.managed_networks().await?;
    for c in all.iter().filter(|c| c.role == Role::Agent) {
        let mode = c.network.map(mode_name).unwrap_or_default();
        let guard = all
            .iter()
            .find(|g| g.role == Role::Guard && g.devcontainer_id == c.devcontainer_id);
        // Another data dir's workspace, or an unreadable file: shown without what yolo saved.
        let state = load_state(c.devcontainer_id.as_deref());
        let details = engine.inspect(&c.id).await.ok();
        let mut network = Network::of(mode, guard);
        if allowlists {
            network = network.ask_allowlist(engine, guard).await;
        }
        rows.push(output::Status {
            container: Some(state.container_view(c)),
            session: state.session.clone(),
            status: Some(c.status.clone()),
            limits: Some(Limits {
                cpus: details.as_ref().and_then(|d| d.cpus),
                memory_bytes: details.as_ref().and_then(|d| d.memory_bytes),
                pids: details.as_ref().and_then(|d| d.pids),
            }),
            network: Some(network),
            // The guard publishes the agent's ports; an agent without one publishes none.
            ports: guard
                .map(|g| g.ports.iter().map(output::Port::of).collect())
                .unwrap_or_default(),
            leftovers: workspace_leftovers(c.devcontainer_id.as_deref(), &all, &networks, &state),
            services: all
                .iter()
                .filter(|s| s.role == Role::Service && s.devcontainer_id == c.devcontainer_id)
                .map(|s| output::Service {
                    name: s.name.clone(),
                    state: s.state.clone(),
                })
                .collect(),
        });
    }
    // Workspaces with leftovers and no agent container: a row of their own.
    let ids: BTreeSet<&str> = all
        .iter()
        .filter_map(|c| c.devcontainer_id.as_deref())
        .chain(networks.iter().filter_map(|n| n.devcontainer_id.as_deref()))
        .collect();
    for id in ids {
        let has_agent = all
            .iter()
            .any(|c| c.role == Role::Agent && c.devcontainer_id.as_deref() == Some(id));
        let state = load_state(Some(id));
        let leftovers = workspace_leftovers(Some(id), &all, &networks, &state);
        if !has_agent && !leftovers.is_empty() {
            rows.push(output::Status {
                container: None,
                session: state.session.clone(),
                status: None,
                limits: None,
                network: None,
                ports: vec![],
                leftovers,
                services: Vec::new(),
            });
        }
    }
    Ok(rows)
}

fn load_state(id: Option<&str>) -> WorkspaceState {
    id.and_then(|id| WorkspaceState::load(id).ok())
        .unwrap_or_default()
}

/// The leftovers of workspace `id` among everything yolo made.
fn workspace_leftovers(
    id: Option<&str>,
    all: &[engine::Container],
    networks: &[ProjectNetwork],
    state: &WorkspaceState,
) -> Vec<Leftover> {
    let Some(id) = id else { return vec![] };
    let containers: Vec<&engine::Container> = all
        .iter()
        .filter(|c| c.devcontainer_id.as_deref() == Some(id))
        .collect();
    let networks: Vec<&ProjectNetwork> = networks
        .iter()
        .filter(|n| n.devcontainer_id.as_deref() == Some(id))
        .collect();
    let workspace = containers
        .iter()
        .find_map(|c| c.workspace.clone())
        .or_else(|| Some(state.workspace.clone()).filter(|w| !w.is_empty()));
    leftovers(&containers, &networks)
        .into_iter()
        .map(|l| Leftover {
            workspace: workspace.clone(),
            ..l
        })
        .collect()
}

/// What is wrong among one workspace's containers and networks: two agents or two guards, a
/// guard without its agent, an agent never started, two networks with one name, a network
/// with no container of its workspace left. Pure.
fn leftovers(containers: &[&engine::Container], networks: &[&ProjectNetwork]) -> Vec<Leftover> {
    let of_role = |role: Role| -> Vec<&engine::Container> {
        containers
            .iter()
            .copied()
            .filter(|c| c.role == role)
            .collect()
    };
    let (agents, guards) = (of_role(Role::Agent), of_role(Role::Guard));
    let mut out = Vec::new();
    let container = |c: &engine::Container, problem: String| Leftover {
        kind: c.role.label().into(),
        id: c.id.clone(),
        name: c.name.clone(),
        state: Some(c.state.clone()),
        problem,
        workspace: None,
    };
    for a in &agents {
        if agents.len() > 1 {
            out.push(container(
                a,
                format!("one of {} agent containers for one workspace", agents.len()),
            ));
        } else if a.state == "created" {
            out.push(container(
                a,
                "an agent container that was never started".into(),
            ));
        }
    }
    for g in &guards {
        if guards.len() > 1 {
            out.push(container(
                g,
                format!("one of {} firewall guards for one workspace", guards.len()),
            ));
        } else if agents.is_empty() {
            out.push(container(
                g,
                "a firewall guard without its agent container".into(),
            ));
        }
    }
    for n in networks {
        let same = networks.iter().filter(|m| m.name == n.name).count();
        let problem = if same > 1 {
            format!("one of {same} networks named {}", n.name)
        } else if containers.is_empty() && n.attached == 0 {
            "a network without its workspace's containers".into()
        } else {
            continue;
        };
        out.push(Leftover {
            kind: "network".into(),
            id: n.id.clone(),
            name: n.name.clone(),
            state: None,
            problem,
            workspace: None,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(role: Role, id: &str, state: &str) -> engine::Container {
        engine::Container {
            id: id.into(),
            name: format!("yolo-repo-{id}"),
            role,
            running: state == "running",
            state: state.into(),
            status: String::new(),
            image: "img".into(),
            devcontainer_id: Some("0abc".into()),
            workspace: None,
            config_file: None,
            copy: None,
            config_hash: None,
            network: None,
            volumes: vec![],
            ports: vec![],
        }
    }

    fn network(id: &str, name: &str, attached: usize) -> ProjectNetwork {
        ProjectNetwork {
            id: id.into(),
            name: name.into(),
            devcontainer_id: Some("0abc".into()),
            attached,
        }
    }

    fn problems(containers: &[engine::Container], networks: &[ProjectNetwork]) -> Vec<String> {
        let c: Vec<_> = containers.iter().collect();
        let n: Vec<_> = networks.iter().collect();
        leftovers(&c, &n)
            .into_iter()
            .map(|l| format!("{} {}: {}", l.kind, l.id, l.problem))
            .collect::<Vec<_>>()
    }

    #[test]
    fn a_whole_workspace_running_or_stopped_has_no_leftovers() {
        let net = network("n1", "yolo-repo-net", 1);
        for state in ["running", "exited"] {
            let both = [
                container(Role::Agent, "a1", state),
                container(Role::Guard, "g1", state),
            ];
            assert!(problems(&both, std::slice::from_ref(&net)).is_empty());
        }
        // `--network none`: an agent alone.
        assert!(problems(&[container(Role::Agent, "a1", "running")], &[]).is_empty());
    }

    #[test]
    fn what_a_failed_up_leaves_is_named() {
        let guard = container(Role::Guard, "g1", "running");
        let net = network("n1", "yolo-repo-net", 1);
        assert_eq!(
            problems(&[guard], &[net]),
            ["guard g1: a firewall guard without its agent container"]
        );
        let never = container(Role::Agent, "a1", "created");
        let guard = container(Role::Guard, "g1", "running");
        assert_eq!(
            problems(&[never, guard], &[]),
            ["agent a1: an agent container that was never started"]
        );
        assert_eq!(
            problems(&[], &[network("n1", "yolo-repo-net", 0)]),
            ["network n1: a network without its workspace's containers"]
        );
    }

    #[test]
    fn two_of_anything_are_both_named() {
        let two_agents = [
            container(Role::Agent, "a1", "running"),
            container(Role::Agent, "a2", "exited"),
            container(Role::Guard, "g1", "running"),
        ];
        assert_eq!(
            problems(&two_agents, &[]),
            [
                "agent a1: one of 2 agent containers for one workspace",
                "agent a2: one of 2 agent containers for one workspace"
            ]
        );
        let two_networks = [
            network("n1", "yolo-repo-net", 1),
            network("n2", "yolo-repo-net", 0),
        ];
        let both = [
            container(Role::Agent, "a1", "running"),
            container(Role::Guard, "g1", "running"),
        ];
        assert_eq!(
            problems(&both, &two_networks),
            [
                "network n1: one of 2 networks named yolo-repo-net",
                "network n2: one of 2 networks named yolo-repo-net"
            ]
        );
    }
}
