//! `--network`, `--pid`, `--ipc`, `--uts`, `--userns` in runArgs: sharing a namespace with the
//! host (or another container): each needs its grant; yolo manages the network itself.

use super::grants::Need;
use super::Eval;
use crate::error::Result;
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
        if !shares {
            return match (flag, value) {
                ("ipc", "private" | "shareable" | "none") => Ok(()),
                ("network", _) => Err(self.config_error(
                    property,
                    format!("--network {value}: yolo manages the container's network (it sits behind yolo's firewall); remove the option"),
                )),
                _ => Err(self.config_error(
                    property,
                    format!("--{flag} {value}: yolo accepts only \"host\" or \"container:NAME\" here (with a grant)"),
                )),
            };
        }
        let (need, reason) = match flag {
            "network" => (
                Need::HostNetwork,
                "the host's network bypasses yolo's firewall",
            ),
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
        self.require(need, property, &format!("--{flag}={value}"), reason)?;
        spec.host_modes.insert(flag.into(), value.into());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;

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
    }
}
