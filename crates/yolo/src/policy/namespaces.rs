//! `--network`, `--pid`, `--ipc`, `--uts`, `--userns` in runArgs: sharing a namespace with the
//! host (or another container). The process, IPC, UTS and user namespaces need their grants; the
//! network namespace is never shared, because the agent joins its firewall guard's.

use super::grants::{Need, HOST_NETWORK_REFUSED};
use super::Eval;
use crate::error::{Error, Result};
use crate::run_spec::RunSpec;

impl Eval<'_> {
    pub(super) fn grant_namespace(
        &mut self,
        spec: &mut RunSpec,
        property: &str,
        flag: &str,
        value: &str,
    ) -> Result<()> {
        let shares = value == "host" || value.starts_with("container:");
        if flag == "network" && shares && self.declines() {
            // Left out, the container joins its guard's namespace as every other does.
            let reason = format!("no grant allows it: {HOST_NETWORK_REFUSED}");
            self.decline(property, &format!("--network={value}"), &reason, None);
            return Ok(());
        }
        if flag == "network" {
            return Err(self.network(property, value, shares));
        }
        if !shares {
            return match (flag, value) {
                ("ipc", "private" | "shareable" | "none") => Ok(()),
                // Another engine's mode (Podman's `--userns=keep-id`, `ns:PATH`): the container
                // keeps the namespace yolo gives it, so it starts without.
                _ if self.declines() => {
                    let reason = format!("yolo gives the container its own {flag} namespace and knows no other mode of it (\"host\" and \"container:NAME\" need a grant)");
                    self.decline(property, &format!("--{flag}={value}"), &reason, None);
                    Ok(())
                }
                _ => Err(self.config_error(
                    property,
                    format!("--{flag} {value}: yolo accepts only \"host\" or \"container:NAME\" here (with a grant)"),
                )),
            };
        }
        let (need, reason) = match flag {
            "pid" => (
                Need::HostPid,
                "sharing process ids lets the agent see and signal other processes",
            ),
            "ipc" => (
                Need::HostIpc,
                "sharing IPC exposes other processes' shared memory",
            ),
            "uts" => (
                Need::HostUts,
                "sharing the UTS namespace lets the agent rename the host",
            ),
            _ => (
                Need::HostUserns,
                "without a user namespace the container's root is the host's root",
            ),
        };
        if self.allow(need, property, &format!("--{flag}={value}"), reason)? {
            spec.host_modes.insert(flag.into(), value.into());
        }
        Ok(())
    }

    /// Every `--network`: the host's or another container's network can never be granted, any
    /// other network is yolo's to choose.
    fn network(&self, property: &str, value: &str, shares: bool) -> Error {
        if shares {
            return Error::Forbidden {
                file: self.file(),
                property: property.into(),
                value: format!("--network={value}"),
                reason: format!("host-network cannot be granted: {HOST_NETWORK_REFUSED}"),
            };
        }
        self.config_error(
            property,
            format!("--network {value}: yolo manages the container's network (it sits behind yolo's firewall); remove the option"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::error::Error;

    #[test]
    fn host_network_is_forbidden_in_every_spelling() {
        let cases: &[(&[&str], &str)] = &[
            (&["--network", "host"], "runArgs[0]"),
            (&["--network=host"], "runArgs[0]"),
            (&["--net=host"], "runArgs[0]"),
            (&["--net", "container:other"], "runArgs[0]"),
            (&["-e", "A=1", "--network=container:db"], "runArgs[2]"),
        ];
        for (args, at) in cases {
            // Declined by default: the container stays in its guard's namespace.
            let spec = run_args(args).grant(&["privileged"]).run().unwrap();
            assert!(!spec.host_modes.contains_key("network"), "{args:?}");
            let [d] = spec.declined.as_slice() else {
                panic!("{args:?}: {:?}", spec.declined);
            };
            assert_eq!((d.property.as_str(), d.grant.as_ref()), (*at, None));
            assert!(d.reason.contains("no grant allows it"), "{}", d.reason);
            let error = run_args(args)
                .refusing()
                .grant(&["privileged"])
                .run()
                .unwrap_err();
            let Error::Forbidden {
                property, value, ..
            } = &error
            else {
                panic!("{args:?}: expected a refusal no grant lifts, got {error:?}");
            };
            assert_eq!(property, at);
            assert!(value.starts_with("--network="), "{value}");
            assert_eq!(error.code(), 77);
            let message = error.to_string();
            assert!(
                message.contains("host-network cannot be granted")
                    && message.contains("owns the container's network namespace")
                    && message.contains("yolo up --network open` once it is gone"),
                "{message}"
            );
            assert!(!message.contains("--grant"), "{message}");
        }
    }

    #[test]
    fn shared_namespaces_need_their_grants() {
        let spec = run_args(&[
            "--pid=host",
            "--ipc",
            "container:x",
            "--uts=host",
            "--userns=host",
        ])
        .grant(&["host-pid", "host-ipc", "host-uts", "host-userns"])
        .run()
        .unwrap();
        assert_eq!(spec.host_modes["pid"], "host");
        assert_eq!(spec.host_modes["ipc"], "container:x");
        assert_eq!(spec.host_modes["uts"], "host");
        assert_eq!(spec.host_modes["userns"], "host");
        assert!(!spec.host_modes.contains_key("network"));
    }
}
