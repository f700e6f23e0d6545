//! The parts of the `RunSpec` a repository sets without any grant: the container's identity,
//! environment, users, lifecycle hooks, shutdown action and default agent. Every field a later
//! concern fills starts empty here.

use super::Eval;
use crate::devcontainer::names::container_name;
use crate::error::Result;
use crate::run_spec::{ImageSource, Limits, RunSpec, UserEnvProbe};
use std::collections::BTreeMap;

impl Eval<'_> {
    pub(super) fn base_spec(&mut self) -> Result<RunSpec> {
        let (workspace_mount, workspace_folder) = self.workspace()?;
        let workspace_mount_note = workspace_mount.clone();
        let update = self.merged_update_uid().unwrap_or(true);
        let name = container_name(self.input.workspace, self.input.devcontainer_id);
        let compose = self.compose_spec(&name)?;
        let image = match &compose {
            // Compose builds or pulls the service's image; this is its label.
            Some(compose) => ImageSource::Image(format!("compose service {}", compose.service)),
            None => self.image_source()?,
        };
        Ok(RunSpec {
            workspace: self.input.workspace.to_path_buf(),
            config_file: self.file(),
            devcontainer_id: self.input.devcontainer_id.to_string(),
            // The named session's name: set by the caller, which knows it (`project::evaluate`).
            copy: None,
            remote_engine: false,
            container_name: name,
            image,
            container_env: self.merged_container_env(),
            remote_env: self.merged_remote_env(),
            container_user: self.merged_container_user()?,
            remote_user: self.merged_remote_user()?,
            update_uid: if update { self.input.host_ids } else { None },
            // As the reference CLI: a Compose service keeps its command unless told otherwise.
            override_command: self
                .merged_override_command()
                .unwrap_or(self.config.docker_compose_file.is_none()),
            workspace_mount,
            workspace_folder,
            mounts: Vec::new(),
            protected: Vec::new(),
            cap_add: Vec::new(),
            privileged: false,
            security_opt: Vec::new(),
            limits: Limits::default(),
            cpus_chosen_by: Default::default(),
            disk_bytes: self.input.user.disk_bytes,
            limits_required: self.input.user.limits_required,
            ports: Vec::new(),
            relays: Vec::new(),
            labels: Default::default(),
            hostname: None,
            extra_hosts: Vec::new(),
            host_modes: BTreeMap::new(),
            devices: Vec::new(),
            hooks: self.merged_hooks(),
            entrypoints: self.entrypoints(),
            metadata_label: String::new(),
            initialize_command: None,
            config_hash: String::new(),
            grants_used: Vec::new(),
            shutdown_action: self.shutdown_action()?,
            user_env_probe: self.user_env_probe()?,
            extra_ca: Vec::new(),
            firewall_allow: self.firewall_allow()?,
            firewall_presets: self.firewall_presets()?,
            default_agent: self.yolo().and_then(|y| y.agent.clone()),
            // Always: the agent spawns many processes; an init reaps them and forwards signals.
            init: true,
            exec_audit: false,
            shm_size: None,
            ulimits: Vec::new(),
            sysctls: BTreeMap::new(),
            platform: None,
            env_files: Vec::new(),
            notes: super::workspace::volume_note(&workspace_mount_note),
            declined: Vec::new(),
            gpus: None,
            compose,
        })
    }

    /// How the user's environment is probed (`userEnvProbe`): the reference CLI's default,
    /// `loginInteractiveShell`, when nobody sets it.
    fn user_env_probe(&self) -> Result<UserEnvProbe> {
        match self.merged_user_env_probe() {
            None => Ok(UserEnvProbe::LoginInteractiveShell),
            Some((value, property)) => UserEnvProbe::parse(value).ok_or_else(|| {
                self.config_error(
                    &property,
                    format!("\"{value}\" is not one of \"none\", \"loginShell\", \"interactiveShell\", \"loginInteractiveShell\""),
                )
            }),
        }
    }

    /// `stopContainer` (the default) or `none`; for a Compose config `stopCompose` (the
    /// default: the whole project) or `none`. The property named in an error is the metadata
    /// entry's when one set it.
    fn shutdown_action(&self) -> Result<String> {
        let compose = self.config.docker_compose_file.is_some();
        let (default, other) = if compose {
            ("stopCompose", "\"none\", \"stopCompose\"")
        } else {
            ("stopContainer", "\"none\", \"stopContainer\"")
        };
        match self.merged_shutdown_action() {
            None => Ok(default.into()),
            Some((a, _)) if a == "none" || a == default => Ok(a.clone()),
            Some((bad, property)) => {
                Err(self.config_error(&property, format!("\"{bad}\" is not one of {other}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::run_spec::{ImageSource, Limits, Mount, MountKind, UserEnvProbe};
    use serde_json::json;

    #[test]
    fn minimal_image_gets_safe_defaults() {
        let spec = ok(with_image(json!({})));
        assert_eq!(
            spec.image,
            ImageSource::Image("debian:bookworm-slim".into())
        );
        assert_eq!(
            spec.workspace_mount,
            Mount {
                kind: MountKind::Bind,
                source: WS.into(),
                target: "/workspaces/My Repo".into(),
                read_only: false
            }
        );
        assert_eq!(spec.workspace_folder, "/workspaces/My Repo");
        assert_eq!(spec.limits, Limits::default());
        assert!(spec.init && spec.override_command && !spec.privileged);
        assert_eq!(spec.shutdown_action, "stopContainer");
        assert_eq!(spec.update_uid, Some((1000, 1000)));
        assert!(
            spec.cap_add.is_empty() && spec.security_opt.is_empty() && spec.grants_used.is_empty()
        );
        assert_eq!(spec.container_name, "yolo-my-repo-01234567");
        assert_eq!(
            spec.mounts,
            [Mount {
                kind: MountKind::Volume,
                source: "yolo-claude-x".into(),
                target: "/home/node/.claude".into(),
                read_only: false
            }]
        );
    }

    #[test]
    fn init_false_is_ignored_and_other_flags_are_copied() {
        let spec = ok(with_image(json!({
            "init": false, "overrideCommand": false, "updateRemoteUserUID": false,
            "shutdownAction": "none", "containerUser": "root", "remoteUser": "dev",
            "containerEnv": {"A": "1"}, "remoteEnv": {"B": null},
            "postCreateCommand": "make", "customizations": {"yolo": {"agent": "codex"}}
        })));
        assert!(spec.init);
        assert!(!spec.override_command);
        assert_eq!(spec.update_uid, None);
        assert_eq!(spec.shutdown_action, "none");
        assert_eq!(spec.container_user.as_deref(), Some("root"));
        assert_eq!(spec.remote_user.as_deref(), Some("dev"));
        assert_eq!(spec.container_env["A"], "1");
        assert_eq!(spec.remote_env["B"], None);
        assert!(spec.hooks.post_create.len() == 1 && spec.hooks.on_create.is_empty());
        assert_eq!(spec.default_agent.as_deref(), Some("codex"));
        assert_eq!(spec.user_env_probe, UserEnvProbe::LoginInteractiveShell);
        let none = ok(with_image(json!({"userEnvProbe": "none"})));
        assert_eq!(none.user_env_probe, UserEnvProbe::None);
    }

    #[test]
    fn bad_shutdown_action_and_missing_image_are_config_errors() {
        let (property, _) =
            config_err(case(with_image(json!({"shutdownAction": "stopCompose"}))).run());
        assert_eq!(property, "shutdownAction");
        let (property, message) =
            config_err(case(with_image(json!({"userEnvProbe": "bash"}))).run());
        assert_eq!(property, "userEnvProbe");
        assert!(message.contains("loginInteractiveShell"), "{message}");
        let (property, _) = config_err(case(json!({})).run());
        assert_eq!(property, "image");
        let (property, _) = config_err(case(json!({"build": {"context": ".."}})).run());
        assert_eq!(property, "build.dockerfile");
    }
}
