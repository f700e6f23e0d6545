//! The host settings the agent and the guard containers share, built in one place: every
//! capability dropped and a few added back, no-new-privileges, CPU, memory and process limits
//! with no swap on top, an init, and ports published on the host's 127.0.0.1 only.

use super::types::NetworkAttach;
use crate::run_spec::{Limits, Mount, MountKind, PortPublish};
use bollard::models::{HostConfig, MountType, PortBinding};
use std::collections::HashMap;

/// What one container's hardening is made of.
pub(super) struct Hardening {
    /// Capabilities added back after dropping all.
    pub(super) cap_add: Vec<String>,
    /// Security options on top of `no-new-privileges`.
    pub(super) security_opt: Vec<String>,
    pub(super) limits: Limits,
    pub(super) init: bool,
    pub(super) network: NetworkAttach,
    /// Published on 127.0.0.1, by a container with a network namespace of its own.
    pub(super) ports: Vec<PortPublish>,
}

pub(super) fn hardened_host_config(h: &Hardening) -> HostConfig {
    let mut security_opt = vec!["no-new-privileges:true".to_string()];
    security_opt.extend(h.security_opt.iter().cloned());
    HostConfig {
        cap_drop: Some(vec!["ALL".into()]),
        cap_add: Some(h.cap_add.clone()),
        security_opt: Some(security_opt),
        init: Some(h.init),
        pids_limit: Some(h.limits.pids),
        memory: Some(h.limits.memory_bytes),
        // Equal to memory: no swap on top of the limit.
        memory_swap: Some(h.limits.memory_bytes),
        nano_cpus: Some((h.limits.cpus * 1e9) as i64),
        network_mode: Some(h.network.mode()),
        port_bindings: h.network.owns_namespace().then(|| port_bindings(&h.ports)),
        ..Default::default()
    }
}

/// `<port>/tcp` of each published port, for the container's exposed ports.
pub(super) fn exposed(ports: &[PortPublish]) -> Vec<String> {
    ports
        .iter()
        .map(|p| format!("{}/tcp", p.container))
        .collect()
}

fn port_bindings(ports: &[PortPublish]) -> HashMap<String, Option<Vec<PortBinding>>> {
    ports
        .iter()
        .map(|p| {
            let binding = PortBinding {
                host_ip: Some("127.0.0.1".into()),
                host_port: Some(p.host.to_string()),
            };
            (format!("{}/tcp", p.container), Some(vec![binding]))
        })
        .collect()
}

pub(super) fn mount(m: &Mount) -> bollard::models::Mount {
    let typ = match m.kind {
        MountKind::Bind => MountType::BIND,
        MountKind::Volume => MountType::VOLUME,
        MountKind::Tmpfs => MountType::TMPFS,
    };
    bollard::models::Mount {
        target: Some(m.target.clone()),
        source: (m.kind != MountKind::Tmpfs).then(|| m.source.clone()),
        typ: Some(typ),
        read_only: Some(m.read_only),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hardening(network: NetworkAttach) -> Hardening {
        Hardening {
            cap_add: vec!["CHOWN".into()],
            security_opt: vec!["apparmor=custom".into()],
            limits: Limits {
                cpus: 1.5,
                memory_bytes: 512 << 20,
                pids: 100,
            },
            init: true,
            network,
            ports: vec![PortPublish {
                host: 18080,
                container: 8080,
            }],
        }
    }

    #[test]
    fn everything_is_dropped_and_no_new_privileges_always_set() {
        let host = hardened_host_config(&hardening(NetworkAttach::None));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(host.cap_add, Some(vec!["CHOWN".to_string()]));
        assert_eq!(
            host.security_opt,
            Some(vec![
                "no-new-privileges:true".to_string(),
                "apparmor=custom".to_string()
            ])
        );
        assert_eq!(host.init, Some(true));
    }

    #[test]
    fn limits_leave_no_swap_on_top() {
        let host = hardened_host_config(&hardening(NetworkAttach::None));
        assert_eq!(host.memory, Some(512 << 20));
        assert_eq!(host.memory_swap, host.memory);
        assert_eq!(host.nano_cpus, Some(1_500_000_000));
        assert_eq!(host.pids_limit, Some(100));
    }

    #[test]
    fn only_a_container_with_its_own_namespace_publishes_and_only_on_loopback() {
        let guard = hardened_host_config(&hardening(NetworkAttach::Network("p-net".into())));
        assert_eq!(guard.network_mode.as_deref(), Some("p-net"));
        let bindings = guard.port_bindings.unwrap();
        let binding = &bindings["8080/tcp"].as_ref().unwrap()[0];
        assert_eq!(binding.host_ip.as_deref(), Some("127.0.0.1"));
        assert_eq!(binding.host_port.as_deref(), Some("18080"));

        let agent = hardened_host_config(&hardening(NetworkAttach::Container("g1".into())));
        assert_eq!(agent.network_mode.as_deref(), Some("container:g1"));
        assert_eq!(agent.port_bindings, None);
        let none = hardened_host_config(&hardening(NetworkAttach::None));
        assert_eq!(none.network_mode.as_deref(), Some("none"));
        assert_eq!(none.port_bindings, None);
    }
}
