//! Image metadata (`devcontainer::metadata`): the entries of the image's `devcontainer.metadata`
//! label and of each Feature, merged with devcontainer.json as the spec's merge logic says (the
//! reference CLI's `mergeConfiguration`), devcontainer.json's own properties last:
//! - `init`, `privileged`: OR; `capAdd`, `securityOpt`: union; `mounts`: collected, the later
//!   one winning a target; `forwardPorts`: union; `hostRequirements`: the maximum;
//! - lifecycle hooks and `entrypoint`s: collected, each entry's runs, in order;
//! - `remoteUser`, `containerUser`, `overrideCommand`, `updateRemoteUserUID`,
//!   `shutdownAction`: the last that sets it; `containerEnv`, `remoteEnv`: per variable.
//!
//! Every request an entry makes (privileged, capabilities, security options, mounts) meets the
//! same checks as the repository's own (`security`, `mounts`), refused unless granted; the
//! refusal's property names the entry: `privileged (asked by Feature "ghcr.io/...:2")`.
//! (`init` needs no merge: yolo always runs one.) `userEnvProbe` is the last that sets it;
//! `waitFor` and the editor settings are not used by yolo; they reach VS Code through the
//! container's label.

use super::Eval;
use crate::devcontainer::metadata::ENTRY_PROPERTIES;
use crate::devcontainer::metadata::{Entry, Origin};
use crate::devcontainer::model::{LifecycleCommand, MountEntry};
use crate::error::Result;
use crate::run_spec::{Hook, Hooks, RunSpec};
use std::collections::BTreeMap;

/// `property (asked by <origin>)`: how a refusal names an entry's request.
pub(super) fn asked_by(property: &str, origin: &Origin) -> String {
    format!("{property} (asked by {origin})")
}

/// The property of devcontainer.json (`None`) or of an entry.
fn property(name: &str, origin: Option<&Origin>) -> String {
    match origin {
        Some(origin) => asked_by(name, origin),
        None => name.to_string(),
    }
}

/// A short name of an entry for a hook's output and audit name: the Feature as the user wrote
/// it, or the image with the entry's index.
fn short_origin(origin: &Origin) -> String {
    match origin {
        Origin::Feature { id } => id.clone(),
        Origin::Image { image, index } => format!("{image} label[{index}]"),
    }
}

impl<'a> Eval<'a> {
    fn entries(&self) -> &'a [(Origin, Entry)] {
        self.input.metadata
    }

    /// A single value, last wins: devcontainer.json's own, else the last entry that sets it,
    /// with that entry's origin.
    pub(super) fn last<T>(
        &self,
        own: Option<&'a T>,
        pick: impl Fn(&'a Entry) -> Option<&'a T>,
    ) -> Option<(&'a T, Option<&'a Origin>)> {
        own.map(|v| (v, None)).or_else(|| {
            self.entries()
                .iter()
                .rev()
                .find_map(|(origin, entry)| pick(entry).map(|v| (v, Some(origin))))
        })
    }

    pub(super) fn merged_remote_user(&self) -> Result<Option<String>> {
        let found = self.last(self.config.remote_user.as_ref(), |e| e.remote_user.as_ref());
        self.user_name("remoteUser", found)
    }

    pub(super) fn merged_container_user(&self) -> Result<Option<String>> {
        let found = self.last(self.config.container_user.as_ref(), |e| {
            e.container_user.as_ref()
        });
        self.user_name("containerUser", found)
    }

    /// A user as the Features' Dockerfile and Docker's `User` take it: a name or uid, with an
    /// optional `:group`. Anything else (a newline, quotes, `$`) is refused: the user is written
    /// into the generated Dockerfile, where a newline would add instructions.
    fn user_name(
        &self,
        name: &str,
        found: Option<(&'a String, Option<&'a Origin>)>,
    ) -> Result<Option<String>> {
        let Some((value, origin)) = found else {
            return Ok(None);
        };
        if crate::devcontainer::features::install::is_user_name(value) {
            return Ok(Some(value.clone()));
        }
        Err(self.config_error(
            &property(name, origin),
            format!(
                "\"{}\" is not a user name: use a user or uid of the image, optionally with \":group\" (letters, digits, '_', '.', '-')",
                crate::visible::escape_controls(value)
            ),
        ))
    }

    pub(super) fn merged_override_command(&self) -> Option<bool> {
        self.last(self.config.override_command.as_ref(), |e| {
            e.override_command.as_ref()
        })
        .map(|(v, _)| *v)
    }

    /// `userEnvProbe` and the property that set it (for its error).
    pub(super) fn merged_user_env_probe(&self) -> Option<(&'a String, String)> {
        self.last(self.config.user_env_probe.as_ref(), |e| {
            e.user_env_probe.as_ref()
        })
        .map(|(v, origin)| (v, property("userEnvProbe", origin)))
    }

    pub(super) fn merged_update_uid(&self) -> Option<bool> {
        self.last(self.config.update_remote_user_uid.as_ref(), |e| {
            e.update_remote_user_uid.as_ref()
        })
        .map(|(v, _)| *v)
    }

    /// `shutdownAction` and the property that set it (for its error).
    pub(super) fn merged_shutdown_action(&self) -> Option<(&'a String, String)> {
        self.last(self.config.shutdown_action.as_ref(), |e| {
            e.shutdown_action.as_ref()
        })
        .map(|(v, origin)| (v, property("shutdownAction", origin)))
    }

    /// Per variable, the last entry (devcontainer.json last) wins.
    pub(super) fn merged_container_env(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        for (_, entry) in self.entries() {
            env.extend(entry.container_env.clone());
        }
        env.extend(self.config.container_env.clone());
        env
    }

    pub(super) fn merged_remote_env(&self) -> BTreeMap<String, Option<String>> {
        let mut env = BTreeMap::new();
        for (_, entry) in self.entries() {
            env.extend(entry.remote_env.clone());
        }
        env.extend(self.config.remote_env.clone());
        env
    }

    /// Every entry's hooks, in order, devcontainer.json's last.
    pub(super) fn merged_hooks(&self) -> Hooks {
        type Pick = fn(&Entry) -> Option<&LifecycleCommand>;
        let collect = |pick: Pick, own: &Option<LifecycleCommand>| -> Vec<Hook> {
            let entries = self.entries().iter().filter_map(|(origin, entry)| {
                pick(entry).map(|command| Hook {
                    origin: Some(short_origin(origin)),
                    command: command.clone(),
                })
            });
            let own = own.iter().map(|command| Hook {
                origin: None,
                command: command.clone(),
            });
            entries.chain(own).collect()
        };
        let c = self.config;
        Hooks {
            on_create: collect(|e| e.on_create_command.as_ref(), &c.on_create_command),
            update_content: collect(
                |e| e.update_content_command.as_ref(),
                &c.update_content_command,
            ),
            post_create: collect(|e| e.post_create_command.as_ref(), &c.post_create_command),
            post_start: collect(|e| e.post_start_command.as_ref(), &c.post_start_command),
            post_attach: collect(|e| e.post_attach_command.as_ref(), &c.post_attach_command),
        }
    }

    /// The entries' `entrypoint`s, in order (devcontainer.json has none).
    pub(super) fn entrypoints(&self) -> Vec<String> {
        self.entries()
            .iter()
            .filter_map(|(_, e)| e.entrypoint.clone())
            .filter(|e| !e.trim().is_empty())
            .collect()
    }

    /// The entries' `privileged`, `capAdd` and `securityOpt`: each needs the grant the
    /// repository's own would, and a refusal names the entry.
    pub(super) fn apply_metadata_security(&mut self, spec: &mut RunSpec) -> Result<()> {
        for (origin, entry) in self.entries() {
            if entry.privileged == Some(true) {
                self.grant_privileged(spec, &asked_by("privileged", origin))?;
            }
            for (i, cap) in entry.cap_add.iter().enumerate() {
                self.grant_cap(spec, &asked_by(&format!("capAdd[{i}]"), origin), cap)?;
            }
            for (i, opt) in entry.security_opt.iter().enumerate() {
                let property = asked_by(&format!("securityOpt[{i}]"), origin);
                self.grant_security_opt(spec, &property, opt)?;
            }
        }
        Ok(())
    }

    /// Every `mounts` entry with the property that names it: the entries' first, in order,
    /// then devcontainer.json's (`mounts` decides which one wins a target).
    pub(super) fn mount_entries(&self) -> Vec<(String, &'a MountEntry)> {
        let entries = self.entries().iter().flat_map(|(origin, entry)| {
            entry
                .mounts
                .iter()
                .enumerate()
                .map(move |(i, m)| (asked_by(&format!("mounts[{i}]"), origin), m))
        });
        let own = self
            .config
            .mounts
            .iter()
            .enumerate()
            .map(|(i, m)| (format!("mounts[{i}]"), m));
        entries.chain(own).collect()
    }

    /// Every `forwardPorts` entry with the property that names it, the entries' first.
    pub(super) fn forward_port_entries(
        &self,
    ) -> Vec<(String, &'a crate::devcontainer::model::PortEntry)> {
        let entries = self.entries().iter().flat_map(|(origin, entry)| {
            entry
                .forward_ports
                .iter()
                .enumerate()
                .map(move |(i, p)| (asked_by(&format!("forwardPorts[{i}]"), origin), p))
        });
        let own = self
            .config
            .forward_ports
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("forwardPorts[{i}]"), p));
        entries.chain(own).collect()
    }

    /// Every `hostRequirements` with its property prefix, the entries' first.
    pub(super) fn host_requirement_entries(
        &self,
    ) -> Vec<(String, &'a crate::devcontainer::model::HostRequirements)> {
        let entries = self.entries().iter().filter_map(|(origin, entry)| {
            entry
                .host_requirements
                .as_ref()
                .map(|h| (asked_by("hostRequirements", origin), h))
        });
        let own = self
            .config
            .host_requirements
            .iter()
            .map(|h| ("hostRequirements".to_string(), h));
        entries.chain(own).collect()
    }
}

/// The `devcontainer.metadata` label of the container: the entries as given (the image's, the
/// Features'), then devcontainer.json's own entry (`config_entry`, its properties that an entry
/// can hold), as the reference CLI's `getDevcontainerMetadata`. Empty entries are left out.
pub(crate) fn label(entries: &[(Origin, Entry)], config_entry: serde_json::Value) -> String {
    let values: Vec<serde_json::Value> = entries
        .iter()
        .filter_map(|(_, e)| serde_json::to_value(e).ok())
        .chain(std::iter::once(config_entry))
        .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
        .collect();
    serde_json::to_string(&values).unwrap_or_else(|_| "[]".into())
}

/// The properties of devcontainer.json that a metadata entry holds (the reference CLI's
/// `pickConfigProperties`), from its raw JSON.
pub(crate) fn config_entry(raw: &serde_json::Value) -> serde_json::Value {
    let picked = raw
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| ENTRY_PROPERTIES.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    serde_json::Value::Object(picked)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use crate::run_spec::MountKind;
    use serde_json::json;

    const DIND: &str = "ghcr.io/devcontainers/features/docker-in-docker:2";

    #[test]
    fn single_values_last_wins_devcontainer_json_last() {
        let c = case(with_image(json!({"containerUser": "root"})))
            .entry(
                image_entry(0),
                json!({"remoteUser": "a", "containerUser": "a", "overrideCommand": false,
                       "updateRemoteUserUID": false, "shutdownAction": "none"}),
            )
            .entry(feature("f"), json!({"remoteUser": "b"}));
        let spec = c.run().unwrap();
        assert_eq!(spec.remote_user.as_deref(), Some("b"));
        assert_eq!(spec.container_user.as_deref(), Some("root"));
        assert!(!spec.override_command);
        assert_eq!(spec.update_uid, None);
        assert_eq!(spec.shutdown_action, "none");
        let spec = case(with_image(
            json!({"remoteUser": "me", "overrideCommand": true, "updateRemoteUserUID": true}),
        ))
        .entry(
            image_entry(0),
            json!({"remoteUser": "a", "overrideCommand": false, "updateRemoteUserUID": false}),
        )
        .run()
        .unwrap();
        assert_eq!(spec.remote_user.as_deref(), Some("me"));
        assert!(spec.override_command);
        assert_eq!(spec.update_uid, Some((1000, 1000)));
    }

    #[test]
    fn a_bad_shutdown_action_names_its_entry() {
        let c = case(with_image(json!({}))).entry(image_entry(0), json!({"shutdownAction": "x"}));
        let (property, _) = config_err(c.run());
        assert_eq!(
            property,
            "shutdownAction (asked by the devcontainer.metadata label of image img:1 (entry 0))"
        );
    }

    #[test]
    fn environments_merge_per_variable() {
        let spec = case(with_image(json!({
            "containerEnv": {"B": "config"}, "remoteEnv": {"Y": null}
        })))
        .entry(
            image_entry(0),
            json!({"containerEnv": {"A": "image", "B": "image"}, "remoteEnv": {"X": "1", "Y": "2"}}),
        )
        .entry(feature("f"), json!({"containerEnv": {"A": "feature"}}))
        .run()
        .unwrap();
        assert_eq!(spec.container_env["A"], "feature");
        assert_eq!(spec.container_env["B"], "config");
        assert_eq!(spec.remote_env["X"].as_deref(), Some("1"));
        assert_eq!(spec.remote_env["Y"], None);
    }

    #[test]
    fn hooks_are_collected_in_order_with_their_origin() {
        let spec = case(with_image(json!({"postCreateCommand": "own"})))
            .entry(image_entry(0), json!({"postCreateCommand": "image"}))
            .entry(
                feature("f:1"),
                json!({"postCreateCommand": ["feature"], "onCreateCommand": "f"}),
            )
            .run()
            .unwrap();
        let names: Vec<_> = spec
            .hooks
            .post_create
            .iter()
            .flat_map(|h| h.commands("postCreateCommand"))
            .map(|(name, argv)| (name, argv.last().cloned().unwrap()))
            .collect();
        assert_eq!(
            names,
            [
                ("postCreateCommand (img:1 label[0])".into(), "image".into()),
                ("postCreateCommand (f:1)".into(), "feature".into()),
                ("postCreateCommand".to_string(), "own".to_string()),
            ]
        );
        assert_eq!(spec.hooks.on_create.len(), 1);
        assert!(spec.hooks.post_start.is_empty());
    }

    #[test]
    fn entrypoints_are_collected() {
        let spec = case(with_image(json!({})))
            .entry(image_entry(0), json!({"entrypoint": "/a.sh"}))
            .entry(feature("f"), json!({"entrypoint": "/b.sh"}))
            .entry(feature("g"), json!({}))
            .run()
            .unwrap();
        assert_eq!(spec.entrypoints, ["/a.sh", "/b.sh"]);
    }

    #[test]
    fn a_features_privileged_is_declined_naming_it() {
        let spec = case(with_image(json!({})))
            .entry(
                feature(DIND),
                json!({"privileged": true, "capAdd": ["SYS_ADMIN"]}),
            )
            .run()
            .unwrap();
        assert!(!spec.privileged && spec.cap_add.is_empty());
        let properties: Vec<String> = declined(&spec).into_iter().map(|d| d.0).collect();
        assert_eq!(
            properties,
            [
                format!("privileged (asked by Feature \"{DIND}\")"),
                format!("capAdd[0] (asked by Feature \"{DIND}\")")
            ]
        );
    }

    #[test]
    fn a_features_privileged_is_refused_naming_it_then_granted() {
        let c = rcase(with_image(json!({}))).entry(feature(DIND), json!({"privileged": true}));
        let (property, value, grant) = refused(c.run());
        assert_eq!(
            property,
            format!("privileged (asked by Feature \"{DIND}\")")
        );
        assert_eq!(value, "privileged mode");
        assert_grant_text(&grant, "privileged");
        let spec = c.clone().grant(&["privileged"]).run().unwrap();
        assert!(spec.privileged);
        assert_eq!(spec.grants_used, ["privileged"]);
        // OR: the config's `false` does not take it back.
        let c = rcase(with_image(json!({"privileged": false})))
            .entry(image_entry(0), json!({"privileged": true}));
        let (property, _, _) = refused(c.run());
        assert!(
            property.ends_with("label of image img:1 (entry 0))"),
            "{property}"
        );
    }

    #[test]
    fn capabilities_and_security_options_are_a_union_each_granted() {
        let c = rcase(with_image(json!({"capAdd": ["NET_RAW"]})))
            .entry(image_entry(0), json!({"capAdd": ["SYS_PTRACE", "NET_RAW"]}))
            .entry(feature("f"), json!({"securityOpt": ["seccomp=unconfined"]}));
        let (property, value, _) = refused(c.clone().grant(&["cap-add=NET_RAW"]).run());
        assert_eq!(
            property,
            "capAdd[0] (asked by the devcontainer.metadata label of image img:1 (entry 0))"
        );
        assert_eq!(value, "capability SYS_PTRACE");
        let (property, _, _) = refused(c.clone().grant(&["cap-add"]).run());
        assert_eq!(property, "securityOpt[0] (asked by Feature \"f\")");
        let spec = c.grant(&["cap-add", "security-opt"]).run().unwrap();
        assert_eq!(spec.cap_add, ["NET_RAW", "SYS_PTRACE"]);
        assert_eq!(spec.security_opt, ["seccomp=unconfined"]);
    }

    #[test]
    fn mounts_are_collected_the_later_winning_a_target() {
        let spec = case(with_image(json!({"mounts": [
            "source=own,target=/data,type=volume"
        ]})))
        .entry(
            image_entry(0),
            json!({"mounts": ["source=img,target=/data,type=volume", "source=cache,target=/cache,type=volume"]}),
        )
        .entry(
            feature("f"),
            json!({"mounts": [{"type": "volume", "source": "f", "target": "/cache"}]}),
        )
        .run()
        .unwrap();
        let mounts: Vec<_> = spec
            .mounts
            .iter()
            .filter(|m| m.kind == MountKind::Volume && !m.source.starts_with("yolo-"))
            .map(|m| (m.source.as_str(), m.target.as_str()))
            .collect();
        assert_eq!(mounts, [("f", "/cache"), ("own", "/data")]);
    }

    #[test]
    fn an_entrys_host_bind_is_refused_naming_it_unless_overridden_or_granted() {
        let bind = json!({"mounts": ["source=/home/me/.ssh,target=/root/.ssh,type=bind"]});
        let c = rcase(with_image(json!({}))).entry(image_entry(0), bind.clone());
        let (property, value, grant) = refused(c.run());
        assert_eq!(
            property,
            "mounts[0] (asked by the devcontainer.metadata label of image img:1 (entry 0))"
        );
        assert!(value.contains("/home/me/.ssh at /root/.ssh"), "{value}");
        assert_grant_text(&grant, "host-mount=/home/me/.ssh");
        assert!(c.clone().grant(&["host-mount=/home/me/.ssh"]).run().is_ok());
        // The config's own mount of that target wins, and so nothing is asked.
        let spec = rcase(with_image(
            json!({"mounts": ["source=keys,target=/root/.ssh,type=volume"]}),
        ))
        .entry(image_entry(0), bind)
        .run()
        .unwrap();
        assert!(spec.mounts.iter().any(|m| m.source == "keys"));
        assert!(spec.grants_used.is_empty());
    }

    #[test]
    fn forward_ports_are_a_union() {
        let spec = case(with_image(json!({"forwardPorts": [3000, 8080]})))
            .entry(image_entry(0), json!({"forwardPorts": [8080, 9000]}))
            .run()
            .unwrap();
        let ports: Vec<u16> = spec.ports.iter().map(|p| p.container).collect();
        assert_eq!(ports, [8080, 9000, 3000]);
        let c = case(with_image(json!({}))).entry(feature("f"), json!({"forwardPorts": ["db:x"]}));
        let (property, _) = config_err(c.run());
        assert_eq!(property, "forwardPorts[0] (asked by Feature \"f\")");
        // Another service's port, asked by a Feature: noted with the Feature named.
        let c =
            case(with_image(json!({}))).entry(feature("f"), json!({"forwardPorts": ["db:5432"]}));
        let spec = c.run().unwrap();
        assert!(spec.ports.is_empty());
        assert_eq!(
            declined(&spec)[0].0,
            "forwardPorts[0] (asked by Feature \"f\")"
        );
    }

    #[test]
    fn host_requirements_take_the_maximum() {
        let spec = case(with_image(
            json!({"hostRequirements": {"cpus": 1, "memory": "2gb"}}),
        ))
        .entry(
            image_entry(0),
            json!({"hostRequirements": {"cpus": 3, "memory": "1gb"}}),
        )
        .run()
        .unwrap();
        assert_eq!(spec.limits.cpus, 3.0);
        assert_eq!(spec.limits.memory_bytes, 2 << 30);
        let c = case(with_image(json!({}))).entry(
            feature("f"),
            json!({"hostRequirements": {"memory": "lots"}}),
        );
        let (property, _) = config_err(c.run());
        assert_eq!(property, "hostRequirements.memory (asked by Feature \"f\")");
    }

    #[test]
    fn the_label_holds_the_entries_then_the_config_as_written() {
        let entries = vec![(
            image_entry(0),
            serde_json::from_value::<Entry>(json!({"remoteUser": "a"})).unwrap(),
        )];
        let raw = json!({"image": "x", "remoteUser": "${localEnv:USER}",
                         "customizations": {"vscode": {"extensions": ["e"]}}, "name": "n"});
        let label = label(&entries, config_entry(&raw));
        let value: serde_json::Value = serde_json::from_str(&label).unwrap();
        assert_eq!(
            value,
            json!([{"remoteUser": "a"}, {"remoteUser": "${localEnv:USER}",
                    "customizations": {"vscode": {"extensions": ["e"]}}}])
        );
        assert_eq!(
            super::label(&[], config_entry(&json!({"image": "x"}))),
            "[]"
        );
    }

    #[test]
    fn no_entries_change_nothing() {
        let config = with_image(json!({"remoteUser": "me", "postStartCommand": "x"}));
        let a = case(config.clone()).run().unwrap();
        let b = case(config).entry(image_entry(0), json!({})).run().unwrap();
        assert_eq!(a.config_hash, b.config_hash);
    }
}
