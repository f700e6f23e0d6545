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

/// The limits of `limits` that `host` (a container's recorded host config, read back) does
/// not hold: "CPU", "memory", "process". A limit is held when the engine recorded a value
/// (the one asked for or, for CPUs, any: engines round); none asked (0) is none to hold.
pub(super) fn dropped_limits(host: &HostConfig, limits: &Limits) -> Vec<&'static str> {
    let held = |value: Option<i64>| value.is_some_and(|v| v > 0);
    let mut dropped = Vec::new();
    if limits.cpus > 0.0 && !held(host.nano_cpus) && !held(host.cpu_quota) {
        dropped.push("CPU");
    }
    if limits.memory_bytes > 0 && !held(host.memory) {
        dropped.push("memory");
    }
    if limits.pids > 0 && !held(host.pids_limit) {
        dropped.push("process");
    }
    dropped
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

/// yolo's own mounts (the workspace, its protected paths, the shim, the guard's folders): host
/// folders as `Binds` entries with the `z` option, everything else as `Mounts`. On a host with
/// SELinux (Fedora, RHEL: Podman's home), a container may read only files labelled for
/// containers; `z` relabels the folder so, shared between containers (the guard and the agent
/// both see the workspace; every agent runs the one shim). Engines without SELinux ignore it.
/// The `Mounts` API has no relabel option, hence `Binds`; a path a bind entry cannot spell
/// (`:` or `,` in it) stays a mount, unlabelled, and so does a source that is not there (a bind
/// entry would have the engine make it, a root-owned folder where a file was meant; a mount
/// fails the create, as before). The user's own `mounts` are not relabelled (`mount`), as the
/// reference CLI leaves them.
pub(super) fn own_mounts(list: &[Mount]) -> (Vec<bollard::models::Mount>, Vec<String>) {
    let mut mounts = Vec::new();
    let mut binds = Vec::new();
    for m in list {
        let spellable = |p: &str| !p.contains([':', ',']);
        let there = std::path::Path::new(&m.source).exists();
        if m.kind == MountKind::Bind && there && spellable(&m.source) && spellable(&m.target) {
            let mode = if m.read_only { "ro" } else { "rw" };
            binds.push(format!("{}:{}:{mode},z", m.source, m.target));
        } else {
            mounts.push(mount(m));
        }
    }
    (mounts, binds)
}

/// Every mount of `host` as (source, target, read-only): its binds (`own_mounts`), then its
/// mounts. For tests that check what is mounted where, however it is spelled.
#[cfg(test)]
pub(super) fn mounted(host: &HostConfig) -> Vec<(String, String, bool)> {
    let binds = host.binds.iter().flatten().map(|b| {
        let (rest, options) = b.rsplit_once(':').expect("source:target:options");
        let (source, target) = rest.split_once(':').expect("source:target");
        assert!(options.ends_with(",z"), "{b}: relabelled");
        // (Sources that are not there in a test's spec are mounts: `own_mounts`.)
        (
            source.to_string(),
            target.to_string(),
            options.starts_with("ro"),
        )
    });
    let mounts = host.mounts.iter().flatten().map(|m| {
        (
            m.source.clone().unwrap_or_default(),
            m.target.clone().unwrap_or_default(),
            m.read_only == Some(true),
        )
    });
    binds.chain(mounts).collect()
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
    fn own_host_folders_are_relabelled_binds_and_the_rest_mounts() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let hooks = repo.join(".git/hooks");
        let odd = dir.path().join("odd:name");
        for d in [&hooks, &odd] {
            std::fs::create_dir_all(d).unwrap();
        }
        let bind = |source: &std::path::Path, target: &str, read_only| Mount {
            kind: MountKind::Bind,
            source: source.display().to_string(),
            target: target.into(),
            read_only,
        };
        let volume = Mount {
            kind: MountKind::Volume,
            source: "state".into(),
            target: "/state".into(),
            read_only: false,
        };
        let (mounts, binds) = own_mounts(&[
            bind(&repo, "/workspaces/repo", false),
            bind(&hooks, "/workspaces/repo/.git/hooks", true),
            volume,
            bind(&odd, "/workspaces/odd", false),
            bind(&repo.join("gone"), "/workspaces/gone", true),
        ]);
        assert_eq!(
            binds,
            vec![
                format!("{}:/workspaces/repo:rw,z", repo.display()),
                format!("{}:/workspaces/repo/.git/hooks:ro,z", hooks.display()),
            ]
        );
        // A name a bind cannot spell, and a source that is not there (a bind would have the
        // engine make it): mounts.
        let targets: Vec<_> = mounts.iter().map(|m| m.target.clone().unwrap()).collect();
        assert_eq!(
            targets,
            vec!["/state", "/workspaces/odd", "/workspaces/gone"]
        );
        assert_eq!(mounts[1].typ, Some(MountType::BIND));
    }

    #[test]
    fn limits_the_engine_did_not_record_are_named() {
        let limits = hardening(NetworkAttach::None).limits;
        let asked = hardened_host_config(&hardening(NetworkAttach::None));
        assert!(dropped_limits(&asked, &limits).is_empty());
        // Rootless Podman on cgroup v1 records zeros; an older engine may record nothing.
        let zeros = HostConfig {
            memory: Some(0),
            pids_limit: Some(0),
            nano_cpus: Some(0),
            cpu_quota: Some(0),
            ..Default::default()
        };
        assert_eq!(
            dropped_limits(&zeros, &limits),
            vec!["CPU", "memory", "process"]
        );
        assert_eq!(
            dropped_limits(&HostConfig::default(), &limits),
            vec!["CPU", "memory", "process"]
        );
        // CPUs as a quota (Podman records `--cpus` so) are held.
        let quota = HostConfig {
            nano_cpus: None,
            cpu_quota: Some(150_000),
            ..asked.clone()
        };
        assert!(dropped_limits(&quota, &limits).is_empty());
        let no_pids = HostConfig {
            pids_limit: Some(-1),
            ..asked
        };
        assert_eq!(dropped_limits(&no_pids, &limits), vec!["process"]);
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
