//! The `--json` shapes of `yolo up`, `yolo status` and `yolo firewall`, documented in
//! docs/json-output.md: one struct per object, used by every command that shows it, so a
//! container or a network has the same fields wherever a script meets it.
//!
//! Not here: the guard's control protocol (`firewall::control`). Its `ok`/`error` envelope
//! is how the guard answers yolo, not something yolo's users see.

use crate::engine::{self, Engine};
use crate::firewall::control::{Request, Response};
use serde::Serialize;
use std::collections::BTreeMap;

/// The project's (agent) container.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Container {
    pub(crate) id: String,
    /// Without Docker's leading `/`.
    pub(crate) name: String,
    pub(crate) image: String,
    /// Docker's state: created, running, exited...
    pub(crate) state: String,
    /// The repository on the host.
    pub(crate) workspace: String,
    /// Where the repository is mounted in the container; `null` if `yolo up` has not
    /// finished with this container yet.
    pub(crate) workspace_folder: Option<String>,
    /// The user `yolo exec`, `shell` and `run` run as; `null`: the image's default.
    pub(crate) remote_user: Option<String>,
}

impl Container {
    /// A listed container, with the folder and user `yolo up` saved for `exec` in it
    /// (`WorkspaceState::container_view`).
    pub(crate) fn from_found(
        c: &engine::Container,
        workspace_folder: Option<String>,
        remote_user: Option<String>,
    ) -> Container {
        Container {
            id: c.id.clone(),
            name: c.name.clone(),
            image: c.image.clone(),
            state: c.state.clone(),
            workspace: c.workspace.clone().unwrap_or_default(),
            workspace_folder,
            remote_user,
        }
    }
}

/// The project's network: its mode, its firewall guard, and the allowlist that guard enforces.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Network {
    /// firewall, open or none.
    pub(crate) mode: String,
    /// The guard container's state (running, exited...; missing when it is gone); `null`
    /// with mode `none`, which has no guard.
    pub(crate) guard: Option<String>,
    /// The patterns the running guard enforces now, `yolo allow`/`deny` included, as the
    /// guard reports them; `null` when no guard is running.
    pub(crate) allowlist: Option<Vec<String>>,
}

impl Network {
    /// `mode` with `guard`'s state; the allowlist is not asked yet (`null`).
    pub(crate) fn of(mode: &str, guard: Option<&engine::Container>) -> Network {
        let state = match guard {
            _ if mode == "none" => None,
            Some(g) => Some(g.state.clone()),
            None => Some("missing".to_string()),
        };
        Network {
            mode: mode.to_string(),
            guard: state,
            allowlist: None,
        }
    }

    /// Ask `guard`, if it runs, for the allowlist it enforces. A guard that does not answer
    /// leaves `allowlist: null` rather than failing the whole command.
    pub(crate) async fn ask_allowlist(
        self,
        engine: &Engine,
        guard: Option<&engine::Container>,
    ) -> Network {
        let Some(g) = guard.filter(|g| g.running && self.mode != "none") else {
            return self;
        };
        let allowlist = engine
            .control(&g.id, &Request::Status)
            .await
            .ok()
            .and_then(|r| r.patterns);
        Network { allowlist, ..self }
    }
}

/// Resource limits of the container; `null`: unlimited.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Limits {
    pub(crate) cpus: Option<f64>,
    pub(crate) memory_bytes: Option<i64>,
    pub(crate) pids: Option<i64>,
}

/// `yolo up --json`.
#[derive(Debug, Serialize)]
pub(crate) struct Up {
    pub(crate) container: Container,
    pub(crate) session: String,
    /// created, started or running (it already was).
    pub(crate) action: String,
    /// Why it was started again or recreated (`--rebuild`, "it was stopped", ...); `null` for
    /// a first create or a reuse.
    pub(crate) reason: Option<String>,
    /// The config changed since the container was made (and `--rebuild` was not given).
    pub(crate) stale: bool,
    pub(crate) network: Network,
    /// The repository's requests the container was made without, each with the grant that
    /// would honour it (docs/json-output.md).
    pub(crate) declined: Vec<crate::run_spec::Declined>,
    /// The credentials the guard adds on their hosts while the agent holds stand-ins
    /// (docs/json-output.md): names and hosts, never a value.
    pub(crate) credentials: Vec<KeptOutside>,
}

/// A credential kept outside the agent container: its name in the user's config (or the
/// preset's) and the hosts its real value may go to.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct KeptOutside {
    pub(crate) name: String,
    pub(crate) hosts: Vec<String>,
}

/// One entry of `yolo status --json`: an agent container, or a workspace that has only
/// leftovers (then `container`, `status`, `limits` and `network` are `null`).
#[derive(Debug, Serialize)]
pub(crate) struct Status {
    pub(crate) container: Option<Container>,
    /// The open session of the container's workspace; `null` when none is open.
    pub(crate) session: Option<String>,
    /// Docker's words, e.g. "Up 3 minutes".
    pub(crate) status: Option<String>,
    pub(crate) limits: Option<Limits>,
    pub(crate) network: Option<Network>,
    /// The ports published for the container (by its guard) now: `forwardPorts`, `appPort`
    /// and `-p`, with the host port Docker bound (another when the asked one was busy).
    pub(crate) ports: Vec<Port>,
    /// What a failed or interrupted `yolo up` (or a hand) left of the workspace's objects;
    /// `yolo down --remove` in the workspace removes them.
    pub(crate) leftovers: Vec<Leftover>,
    /// The other services of a Compose project (absent for a single container).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) services: Vec<Service>,
}

/// A Compose service besides the agent's: its container and Docker's state of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Service {
    pub(crate) name: String,
    pub(crate) state: String,
}

/// A published port: `address:host` on the host reaches `container` in the container.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Port {
    pub(crate) container: u16,
    pub(crate) host: u16,
    /// Always 127.0.0.1: yolo publishes nothing beyond this machine.
    pub(crate) address: String,
}

impl Port {
    pub(crate) fn of(p: &crate::run_spec::PortPublish) -> Port {
        Port {
            container: p.container,
            host: p.host,
            address: "127.0.0.1".into(),
        }
    }
}

/// A container or network of a workspace that should not be there as it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Leftover {
    /// agent, guard or network.
    pub(crate) kind: String,
    pub(crate) id: String,
    pub(crate) name: String,
    /// Docker's state of a container; `null` for a network.
    pub(crate) state: Option<String>,
    /// What is wrong with it, in words.
    pub(crate) problem: String,
    /// The workspace it was made for, when yolo can tell (its agent's label, or yolo's state).
    pub(crate) workspace: Option<String>,
}

/// `yolo firewall --json`.
#[derive(Debug, Serialize)]
pub(crate) struct Firewall {
    /// `null` if the guard runs without its agent container.
    pub(crate) container: Option<Container>,
    pub(crate) session: Option<String>,
    pub(crate) network: Network,
    /// What the sets hold now: addresses opened by DNS answers (with their expiry) and the
    /// static networks of the allowlist.
    pub(crate) open_addresses: Vec<OpenAddress>,
    /// Packet counters of the ruleset, by name.
    pub(crate) counters: BTreeMap<String, Counter>,
}

impl Firewall {
    /// The guard's status answer, without its protocol envelope.
    pub(crate) fn from_response(
        container: Option<Container>,
        session: Option<String>,
        response: Response,
    ) -> Firewall {
        let mode = response
            .mode
            .map(crate::firewall::mode_name)
            .unwrap_or("firewall");
        Firewall {
            container,
            session,
            network: Network {
                mode: mode.to_string(),
                guard: Some("running".into()),
                allowlist: response.patterns,
            },
            open_addresses: response
                .elements
                .into_iter()
                .map(|e| OpenAddress {
                    set: e.set,
                    element: e.element,
                    timeout_secs: e.timeout_secs,
                    expires_secs: e.expires_secs,
                })
                .collect(),
            counters: response
                .counters
                .into_iter()
                .map(|(name, c)| {
                    let counter = Counter {
                        packets: c.packets,
                        bytes: c.bytes,
                    };
                    (name, counter)
                })
                .collect(),
        }
    }
}

/// One element of the firewall's sets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct OpenAddress {
    /// allow4, allow6 (any port), allow4_port, allow6_port (one port), net4, net6, net4_port,
    /// net6_port (static networks).
    pub(crate) set: String,
    /// As nft writes it: `192.0.2.7`, `192.0.2.7 . 443`, `10.0.0.0/8`.
    pub(crate) element: String,
    /// Lifetime it was given, seconds; `null` for static networks.
    pub(crate) timeout_secs: Option<u64>,
    /// Seconds left; `null` for static networks.
    pub(crate) expires_secs: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Counter {
    pub(crate) packets: u64,
    pub(crate) bytes: u64,
}

/// Pretty JSON on stdout. These types are strings, numbers and maps: serializing cannot fail.
pub(crate) fn print(value: &impl Serialize) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

/// A table of `N` columns, each as wide as its widest cell, the last one unpadded.
pub(crate) fn print_table<const N: usize>(header: [&str; N], rows: &[[String; N]]) {
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; N]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        out
    };
    println!("{}", line(header));
    for row in rows {
        println!("{}", line(row.each_ref().map(String::as_str)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firewall::control::{Counter as WireCounter, SetElement};
    use serde_json::json;

    #[test]
    fn the_firewall_output_has_no_protocol_envelope() {
        let response = Response {
            ok: true,
            mode: Some(crate::firewall::NetworkMode::Firewall),
            patterns: Some(vec!["example.com:443".into()]),
            elements: vec![SetElement {
                set: "allow4_port".into(),
                element: "192.0.2.7 . 443".into(),
                timeout_secs: Some(300),
                expires_secs: Some(299),
            }],
            counters: BTreeMap::from([(
                "blocked".to_string(),
                WireCounter {
                    packets: 3,
                    bytes: 180,
                },
            )]),
            ..Default::default()
        };
        let out = Firewall::from_response(None, Some("s1".into()), response);
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            json!({
                "container": null,
                "session": "s1",
                "network": {
                    "mode": "firewall",
                    "guard": "running",
                    "allowlist": ["example.com:443"]
                },
                "open_addresses": [{
                    "set": "allow4_port",
                    "element": "192.0.2.7 . 443",
                    "timeout_secs": 300,
                    "expires_secs": 299
                }],
                "counters": {"blocked": {"packets": 3, "bytes": 180}}
            })
        );
    }
}
