//! `initializeCommand` runs on the host, outside every sandbox: only with the user's trust
//! (`--trust-host-commands`, `trust_host_commands = true`, or the `initialize-command` grant) or
//! the user's answer. The policy passes it on, marking whether it is trusted; the question (or,
//! with nobody to ask, the refusal) comes where it is about to run
//! (`session::approval::confirm_host_command`), so a reused container never asks.

use super::Eval;
use crate::devcontainer::model::LifecycleCommand;
use crate::error::Result;

impl Eval<'_> {
    pub(super) fn initialize_command(&mut self) -> Result<Option<LifecycleCommand>> {
        let Some(command) = &self.config.initialize_command else {
            return Ok(None);
        };
        if !self.trust_host_commands {
            return Ok(Some(command.clone()));
        }
        let name = if self.grants.initialize_command() {
            "initialize-command"
        } else {
            "trust-host-commands"
        };
        self.record_use(name.into());
        Ok(Some(command.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn initialize_command_is_passed_on_and_trust_is_recorded_as_a_grant_used() {
        let c = case(with_image(json!({"initializeCommand": "echo hi"})));
        // Untrusted: passed on to be confirmed where it runs; no grant was used.
        let spec = c.run().unwrap();
        assert!(spec.initialize_command.is_some());
        assert!(spec.grants_used.is_empty(), "{:?}", spec.grants_used);
        let mut trusted = case(c.config.clone());
        trusted.flags.trust_host_commands = true;
        let spec = trusted.run().unwrap();
        assert!(spec.initialize_command.is_some());
        assert_eq!(spec.grants_used, ["trust-host-commands"]);
        let spec = case(c.config.clone())
            .grant(&["initialize-command"])
            .run()
            .unwrap();
        assert_eq!(spec.grants_used, ["initialize-command"]);
    }
}
