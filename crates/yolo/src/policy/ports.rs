//! Published ports: `forwardPorts`, `appPort` and `-p` in runArgs. The host side always binds
//! 127.0.0.1. A `forwardPorts` entry naming another host (`"db:5432"`, as VS Code forwards a
//! Compose sibling's) is, in a Compose config, forwarded through the guard: published like the
//! container's own ports, and relayed by the guard to the sibling (`RunSpec::relays`; the
//! project's services are checked when it starts). Elsewhere it names nothing the guard can
//! reach, and is left out with a note in `RunSpec::declined`.

use super::Eval;
use crate::devcontainer::model::{AppPort, PortEntry};
use crate::error::Result;
use crate::run_spec::{PortPublish, RunSpec, SiblingPort};
use std::fmt;

/// Why a port request is not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PortError {
    NotAPort { text: String },
    NotTcp { text: String },
    NotLocal { text: String, ip: String },
    Form { text: String },
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortError::NotAPort { text } => {
                write!(f, "\"{text}\" is not a port number (1-65535)")
            }
            PortError::NotTcp { text } => {
                write!(f, "\"{text}\": only TCP ports can be published")
            }
            PortError::NotLocal { text, ip } => write!(
                f,
                "\"{text}\": yolo publishes ports on 127.0.0.1 only, not {ip}"
            ),
            PortError::Form { text } => write!(
                f,
                "\"{text}\" is not PORT, HOST:CONTAINER or IP:HOST:CONTAINER"
            ),
        }
    }
}

impl std::error::Error for PortError {}

fn parse_port(text: &str) -> Result<u16, PortError> {
    match text.trim().parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(PortError::NotAPort { text: text.into() }),
    }
}

/// `appPort`/`-p` string forms: `"3000"`, `"8080:80"`, `"127.0.0.1:8080:80"`, with an optional
/// `/tcp`. The host side always binds 127.0.0.1, whatever address the repository names.
pub(super) fn parse_app_port(text: &str) -> Result<PortPublish, PortError> {
    let spec = text.strip_suffix("/tcp").unwrap_or(text);
    if spec.contains('/') {
        return Err(PortError::NotTcp { text: text.into() });
    }
    let parts: Vec<&str> = spec.split(':').collect();
    let (host, container) = match parts.as_slice() {
        [port] => (*port, *port),
        [host, container] => (*host, *container),
        [ip, host, container] if is_local_address(ip) || ip.is_empty() || *ip == "0.0.0.0" => {
            (*host, *container)
        }
        [ip, _, _] => {
            return Err(PortError::NotLocal {
                text: text.into(),
                ip: (*ip).into(),
            })
        }
        _ => return Err(PortError::Form { text: text.into() }),
    };
    Ok(PortPublish {
        host: parse_port(host)?,
        container: parse_port(container)?,
    })
}

fn is_local_address(host: &str) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "::1" | "[::1]")
}

impl Eval<'_> {
    /// forwardPorts, then appPort, then `-p` runArgs; repeats dropped, and one host port may
    /// not point at two container ports.
    /// With them, the siblings' ports relayed through the guard (Compose configs).
    pub(super) fn ports(&mut self, spec: &RunSpec) -> Result<(Vec<PortPublish>, Vec<SiblingPort>)> {
        let mut requested: Vec<(String, PortPublish)> = Vec::new();
        let mut elsewhere: Vec<(String, String, u16)> = Vec::new();
        for (property, entry) in self.forward_port_entries() {
            match forward_port(entry, spec).map_err(|e| self.config_error(&property, e))? {
                Forward::Own(port) => requested.push((property, port)),
                Forward::Other { host, port } => elsewhere.push((property, host, port)),
            }
        }
        let app: Vec<(String, &PortEntry)> = match &self.config.app_port {
            None => Vec::new(),
            Some(AppPort::One(e)) => vec![("appPort".into(), e)],
            Some(AppPort::Many(v)) => v
                .iter()
                .enumerate()
                .map(|(i, e)| (format!("appPort[{i}]"), e))
                .collect(),
        };
        for (property, entry) in app {
            let port = match entry {
                PortEntry::Number(n) => parse_port(&n.to_string()).map(|p| PortPublish {
                    host: p,
                    container: p,
                }),
                PortEntry::Text(t) => parse_app_port(t),
            }
            .map_err(|e| self.config_error(&property, e))?;
            requested.push((property, port));
        }
        requested.extend(self.run_ports.iter().cloned());
        let mut relays: Vec<SiblingPort> = Vec::new();
        for (property, host, port) in elsewhere {
            // The guard listens on the sibling's port number in the namespace it shares with
            // the agent: not where one of the container's own ports is.
            let taken = requested
                .iter()
                .any(|(_, p)| p.container == port || p.host == port)
                || relays.iter().any(|r| r.port == port)
                || yolo_protocol::GUARD_PORTS.contains(&port);
            if self.config.docker_compose_file.is_some() && !taken {
                relays.push(SiblingPort {
                    property,
                    host,
                    port,
                });
            } else {
                self.decline_other_host(&property, &host, port, taken);
            }
        }
        requested.extend(relays.iter().map(|r| {
            (
                r.property.clone(),
                PortPublish {
                    host: r.port,
                    container: r.port,
                },
            )
        }));
        Ok((self.merge_ports(requested)?, relays))
    }

    /// A forward of another host's port the guard cannot relay: not published, noted with
    /// what to do instead. Not a refusal in either `[policy] requests` mode: leaving it out
    /// weakens nothing.
    fn decline_other_host(&mut self, property: &str, host: &str, port: u16, taken: bool) {
        let reason = if taken {
            "the dev container's own forwarded ports, or the guard's DNS or proxy, already use that port number"
        } else {
            "only a Compose config's sibling services can be forwarded through the guard"
        };
        self.decline(property, &format!("port {port} of {host}"), reason, None);
        if let Some(last) = self.declined.last_mut() {
            last.hint = Some(format!(
                "reach it from inside the container as {host}:{port}, or publish it in the \
                 Compose file (`ports:` of {host})"
            ));
        }
    }

    fn merge_ports(&self, requested: Vec<(String, PortPublish)>) -> Result<Vec<PortPublish>> {
        let mut out: Vec<PortPublish> = Vec::new();
        for (property, port) in requested {
            if out.contains(&port) {
                continue;
            }
            if let Some(other) = out.iter().find(|p| p.host == port.host) {
                return Err(self.config_error(
                    &property,
                    format!(
                        "host port {} already forwards to container port {}",
                        port.host, other.container
                    ),
                ));
            }
            out.push(port);
        }
        Ok(out)
    }
}

/// A `forwardPorts` entry: a port of this container, or of another host the container reaches
/// (a Compose service).
enum Forward {
    Own(PortPublish),
    Other { host: String, port: u16 },
}

/// A number, or `"host:port"`: host is this container (localhost, its hostname or name) or
/// another one (the spec allows naming other Compose services).
fn forward_port(entry: &PortEntry, spec: &RunSpec) -> Result<Forward, PortError> {
    let port = match entry {
        PortEntry::Number(n) => parse_port(&n.to_string())?,
        PortEntry::Text(text) => match text.rsplit_once(':') {
            None => parse_port(text)?,
            Some((host, port)) => {
                let port = parse_port(port)?;
                let own = is_local_address(host)
                    || spec.hostname.as_deref() == Some(host)
                    || host == spec.container_name;
                if host.is_empty() || host.contains(':') {
                    return Err(PortError::Form { text: text.clone() });
                }
                if !own {
                    return Ok(Forward::Other {
                        host: host.into(),
                        port,
                    });
                }
                port
            }
        },
    };
    Ok(Forward::Own(PortPublish {
        host: port,
        container: port,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::run_spec::PortPublish;
    use serde_json::json;

    #[test]
    fn forward_ports_and_app_port() {
        let spec = ok(with_image(json!({
            "forwardPorts": [3000, "localhost:5000", "127.0.0.1:3000"],
            "appPort": [8080, "9090:90", "127.0.0.1:7000:70"]
        })));
        let pairs: Vec<(u16, u16)> = spec.ports.iter().map(|p| (p.host, p.container)).collect();
        assert_eq!(
            pairs,
            [
                (3000, 3000),
                (5000, 5000),
                (8080, 8080),
                (9090, 90),
                (7000, 70)
            ]
        );
        let spec = ok(with_image(json!({"appPort": "8000:80"})));
        assert_eq!(
            spec.ports,
            [PortPublish {
                host: 8000,
                container: 80
            }]
        );
        let spec = ok(with_image(json!({"appPort": 4000})));
        assert_eq!(
            spec.ports,
            [PortPublish {
                host: 4000,
                container: 4000
            }]
        );
        let spec = ok(with_image(
            json!({"runArgs": ["--hostname", "box"], "forwardPorts": ["box:81"]}),
        ));
        assert_eq!(
            spec.ports,
            [PortPublish {
                host: 81,
                container: 81
            }]
        );
    }

    #[test]
    fn bad_ports_are_config_errors() {
        let cases = [
            (json!({"forwardPorts": [0]}), "forwardPorts[0]"),
            (json!({"forwardPorts": ["db:http"]}), "forwardPorts[0]"),
            (json!({"forwardPorts": [":5432"]}), "forwardPorts[0]"),
            (json!({"forwardPorts": [1, "x:y:z"]}), "forwardPorts[1]"),
            (json!({"appPort": "80:http"}), "appPort"),
            (json!({"appPort": [80, "53/udp"]}), "appPort[1]"),
            (json!({"appPort": ["8080:80", "8080:81"]}), "appPort[1]"),
            (json!({"appPort": "70000"}), "appPort"),
        ];
        for (config, property) in cases {
            let (p, _) = config_err(case(with_image(config.clone())).run());
            assert_eq!(p, property, "{config}");
        }
    }

    #[test]
    fn another_services_port_is_noted_not_published() {
        for requests in ["decline", "refuse"] {
            let c = case(with_image(json!({
                "forwardPorts": [3000, "db:5432", "cache:6379"],
                "portsAttributes": {"db:5432": {"label": "Postgres"}}
            })));
            let c = if requests == "refuse" {
                c.refusing()
            } else {
                c
            };
            let spec = c.run().unwrap();
            assert_eq!(
                spec.ports,
                [PortPublish {
                    host: 3000,
                    container: 3000
                }],
                "{requests}"
            );
            let notes: Vec<_> = spec
                .declined
                .iter()
                .map(|d| (d.property.as_str(), d.value.as_str(), d.grant.clone()))
                .collect();
            assert_eq!(
                notes,
                [
                    ("forwardPorts[1]", "port 5432 of db", None),
                    ("forwardPorts[2]", "port 6379 of cache", None)
                ],
                "{requests}"
            );
            let hint = spec.declined[0].hint.as_deref().unwrap();
            assert!(hint.contains("db:5432"), "{hint}");
        }
    }

    /// In a Compose config, a sibling's port is published and relayed by the guard, unless
    /// the container's own forwarded ports use its number.
    #[test]
    fn a_compose_siblings_port_is_relayed_through_the_guard() {
        let spec = ok(json!({
            "dockerComposeFile": "compose.yml",
            "service": "app",
            "workspaceFolder": "/workspaces/repo",
            "forwardPorts": [3000, "db:5432", "cache:3000", "db:5432", "web:3443"],
        }));
        let relays: Vec<_> = spec
            .relays
            .iter()
            .map(|r| (r.property.as_str(), r.host.as_str(), r.port))
            .collect();
        assert_eq!(relays, [("forwardPorts[1]", "db", 5432)]);
        let published: Vec<_> = spec.ports.iter().map(|p| (p.host, p.container)).collect();
        assert_eq!(published, [(3000, 3000), (5432, 5432)]);
        let notes: Vec<_> = spec
            .declined
            .iter()
            .map(|d| (d.property.as_str(), d.reason.as_str()))
            .collect();
        assert_eq!(
            notes,
            [
                (
                    "forwardPorts[2]",
                    "the dev container's own forwarded ports, or the guard's DNS or proxy, already use that port number"
                ),
                (
                    "forwardPorts[3]",
                    "the dev container's own forwarded ports, or the guard's DNS or proxy, already use that port number"
                ),
                (
                    "forwardPorts[4]",
                    "the dev container's own forwarded ports, or the guard's DNS or proxy, already use that port number"
                )
            ]
        );
    }
}
