//! Published ports: `forwardPorts`, `appPort` and `-p` in runArgs. The host side always binds
//! 127.0.0.1, and only this container's ports can be forwarded.

use super::Eval;
use crate::devcontainer::model::{AppPort, PortEntry};
use crate::error::Result;
use crate::run_spec::{PortPublish, RunSpec};
use std::fmt;

/// Why a port request is not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PortError {
    NotAPort { text: String },
    NotTcp { text: String },
    NotLocal { text: String, ip: String },
    Form { text: String },
    OtherHost { text: String, host: String },
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
            PortError::OtherHost { text, host } => write!(
                f,
                "\"{text}\": yolo forwards only ports of this container, not of {host}"
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
    pub(super) fn ports(&self, spec: &RunSpec) -> Result<Vec<PortPublish>> {
        let mut requested: Vec<(String, PortPublish)> = Vec::new();
        for (property, entry) in self.forward_port_entries() {
            let port = forward_port(entry, spec).map_err(|e| self.config_error(&property, e))?;
            requested.push((property, port));
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
        self.merge_ports(requested)
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

/// A number, or `"host:port"` where host is this container (the spec allows naming other
/// Compose services, which yolo cannot reach).
fn forward_port(entry: &PortEntry, spec: &RunSpec) -> Result<PortPublish, PortError> {
    let port = match entry {
        PortEntry::Number(n) => parse_port(&n.to_string())?,
        PortEntry::Text(text) => match text.rsplit_once(':') {
            None => parse_port(text)?,
            Some((host, port)) => {
                let own = is_local_address(host)
                    || spec.hostname.as_deref() == Some(host)
                    || host == spec.container_name;
                if !own {
                    return Err(PortError::OtherHost {
                        text: text.clone(),
                        host: host.into(),
                    });
                }
                parse_port(port)?
            }
        },
    };
    Ok(PortPublish {
        host: port,
        container: port,
    })
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
            (json!({"forwardPorts": ["db:5432"]}), "forwardPorts[0]"),
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
}
