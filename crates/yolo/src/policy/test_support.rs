//! The fluent test case of every policy test: `case(json).grant(..).run()` evaluates a
//! devcontainer.json (as JSON) with grants, user config and flags; the helpers unpack results.

use super::{evaluate, Facts, Flags, Grant, Grants, Input, UserLayer};
use crate::devcontainer::metadata::{Entry, Origin};
use crate::devcontainer::model::DevContainer;
use crate::error::{Error, Result};
use crate::run_spec::RunSpec;
use std::path::PathBuf;

pub(super) const WS: &str = "/home/me/src/My Repo";
pub(super) const CFG: &str = "/home/me/src/My Repo/.devcontainer/devcontainer.json";
pub(super) const ID: &str = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdef";

#[derive(Clone)]
pub(super) struct Case {
    pub(super) config: serde_json::Value,
    /// The user's config as `settings` resolved it.
    pub(super) user: UserLayer,
    /// The config file's `grants`, parsed with the `--grant` words when the case runs.
    pub(super) user_grants: Vec<String>,
    pub(super) flags: Flags,
    /// `--grant` words, parsed with the user's `grants` when the case runs.
    pub(super) grants: Vec<String>,
    pub(super) workspace: PathBuf,
    pub(super) config_file: PathBuf,
    /// Image metadata entries merged before the config.
    pub(super) metadata: Vec<(Origin, Entry)>,
    /// What the disk holds; `None`: nothing below the workspace (`nothing_on_disk`).
    pub(super) facts: Option<Facts>,
}

pub(super) fn case(config: serde_json::Value) -> Case {
    Case {
        config,
        user: UserLayer::default(),
        user_grants: Vec::new(),
        flags: Flags::default(),
        grants: Vec::new(),
        workspace: WS.into(),
        config_file: CFG.into(),
        metadata: Vec::new(),
        facts: None,
    }
}

/// The facts of a workspace with nothing in it and no git root: its folders looked at, no
/// protected path there yet.
pub(super) fn nothing_on_disk(config: &DevContainer, workspace: &std::path::Path) -> Facts {
    let source = super::workspace_source(config, workspace);
    Facts {
        looked: source
            .map(|s| super::protected_roots(&s, workspace))
            .unwrap_or_default()
            .into_iter()
            .collect(),
        ..Facts::default()
    }
}

impl Case {
    pub(super) fn grant(mut self, grants: &[&str]) -> Self {
        self.grants = grants.iter().map(|g| g.to_string()).collect();
        self
    }

    /// With `[policy] requests = "refuse"`: what needs a grant stops the evaluation.
    pub(super) fn refusing(mut self) -> Self {
        self.user.requests = super::Requests::Refuse;
        self
    }

    /// What the disk holds, for this case.
    pub(super) fn with_facts(mut self, facts: Facts) -> Self {
        self.facts = Some(facts);
        self
    }

    /// Add a metadata entry (as JSON) from `origin`, after those already added.
    pub(super) fn entry(mut self, origin: Origin, entry: serde_json::Value) -> Self {
        self.metadata
            .push((origin, serde_json::from_value(entry).unwrap()));
        self
    }

    pub(super) fn run(&self) -> Result<RunSpec> {
        let config: DevContainer = serde_json::from_value(self.config.clone()).unwrap();
        // What clap does with `--grant` words (a bad one is a usage error there).
        let parsed = self
            .grants
            .iter()
            .map(|g| g.parse::<Grant>())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::Usage(format!("--grant: {e}")))?;
        let flags = Flags {
            grants: Grants::parse(&self.user_grants, &parsed)?,
            ..self.flags.clone()
        };
        let facts = self
            .facts
            .clone()
            .unwrap_or_else(|| nothing_on_disk(&config, &self.workspace));
        let input = Input {
            config: &config,
            config_file: &self.config_file,
            workspace: &self.workspace,
            devcontainer_id: ID,
            user: &self.user,
            flags: &flags,
            host_ids: Some((1000, 1000)),
            agent_volumes: vec![("yolo-claude-x".into(), "/home/node/.claude".into())],
            metadata: &self.metadata,
            facts: &facts,
        };
        evaluate(&input)
    }
}

/// The origin of entry `index` of the test image's label.
pub(super) fn image_entry(index: usize) -> Origin {
    Origin::Image {
        image: "img:1".into(),
        index,
    }
}

pub(super) fn feature(id: &str) -> Origin {
    Origin::Feature { id: id.into() }
}

pub(crate) fn ok(config: serde_json::Value) -> RunSpec {
    case(config).run().unwrap()
}

pub(super) fn with_image(mut extra: serde_json::Value) -> serde_json::Value {
    extra["image"] = serde_json::json!("debian:bookworm-slim");
    extra
}

/// Unpacks a refusal: (property, value, grant); of several, the first.
pub(super) fn refused(result: Result<RunSpec>) -> (String, String, String) {
    let result = match result {
        Err(Error::RefusedMany { mut refusals, .. }) => Err(refusals.remove(0)),
        other => other,
    };
    match result {
        Err(Error::Refused {
            property,
            value,
            grant,
            reason,
            ..
        }) => {
            assert!(!reason.is_empty());
            (property, value, grant)
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The requests a spec left out: (property, value, grant).
pub(super) fn declined(spec: &RunSpec) -> Vec<(String, String, Option<String>)> {
    spec.declined
        .iter()
        .map(|d| (d.property.clone(), d.value.clone(), d.grant.clone()))
        .collect()
}

/// Unpacks a config error: (property, message).
pub(super) fn config_err(result: Result<RunSpec>) -> (String, String) {
    match result {
        Err(Error::Config {
            property, message, ..
        }) => (property.unwrap_or_default(), message),
        other => panic!("expected a config error, got {other:?}"),
    }
}

pub(super) fn assert_grant_text(grant: &str, name: &str) {
    assert!(grant.contains(&format!("--grant {name}")), "{grant}");
    assert!(grant.contains(&format!("grants = [\"{name}\"]")), "{grant}");
}

/// A case whose config is only an image and these runArgs.
pub(super) fn run_args(args: &[&str]) -> Case {
    case(with_image(serde_json::json!({ "runArgs": args })))
}

/// `case` under `[policy] requests = "refuse"`: the tests that pin a refusal.
pub(super) fn rcase(config: serde_json::Value) -> Case {
    case(config).refusing()
}
