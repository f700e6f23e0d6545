//! Variable substitution per the devcontainer spec.
use super::model::DevContainer;
use std::collections::BTreeMap;

pub struct Context<'a> {
    pub local_workspace_folder: &'a str,
    pub container_workspace_folder: &'a str,
    pub devcontainer_id: &'a str,
    /// Host environment lookup (`${localEnv:..}`); injected so tests need not touch the process env.
    pub local_env: &'a dyn Fn(&str) -> Option<String>,
}

/// Substitute every `${...}` the spec defines for the host side in every string of the config.
/// `${containerEnv:VAR}` is left in place (resolved later by `container_env`).
pub fn substitute(config: &DevContainer, ctx: &Context) -> DevContainer {
    let _ = (config, ctx);
    todo!("helper: substitute")
}

/// Resolve `${containerEnv:VAR[:default]}` in a remoteEnv value against the container's env.
pub fn container_env(value: &str, env: &BTreeMap<String, String>) -> String {
    let _ = (value, env);
    todo!("helper: substitute")
}
