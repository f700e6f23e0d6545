//! `initializeCommand` runs on the host, outside every sandbox: only with the user's trust
//! (`--trust-host-commands`, `trust_host_commands = true`, or the `initialize-command` grant).

use super::Eval;
use crate::devcontainer::model::LifecycleCommand;
use crate::error::{Error, Result};
use crate::user_config::UserConfig;

impl Eval<'_> {
    pub(super) fn initialize_command(&mut self) -> Result<Option<LifecycleCommand>> {
        let Some(command) = &self.config.initialize_command else {
            return Ok(None);
        };
        if !self.trust_host_commands {
            let shown = command
                .commands("initializeCommand")
                .into_iter()
                .map(|(_, argv)| argv.join(" "))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(Error::Refused {
                file: self.file(),
                property: "initializeCommand".into(),
                value: format!("`{shown}`"),
                reason: "it runs on your host, outside the container".into(),
                grant: format!(
                    "--trust-host-commands, or trust_host_commands = true in {}",
                    UserConfig::path().display()
                ),
            });
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
    fn initialize_command_needs_trust() {
        let c = case(with_image(json!({"initializeCommand": "echo hi"})));
        let (property, value, grant) = refused(c.run());
        assert_eq!(property, "initializeCommand");
        assert!(value.contains("echo hi"), "{value}");
        assert!(
            grant.contains("--trust-host-commands") && grant.contains("trust_host_commands = true")
        );
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
        let mut by_config = case(c.config.clone());
        by_config.user.trust_host_commands = true;
        assert!(by_config.run().is_ok());
    }
}
