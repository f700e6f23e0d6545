//! Every bind a config asks for, wherever it asks (its mounts, its metadata entries', `-v` and
//! `--mount` in `runArgs`): the host paths whose real destination `policy_facts` reads before the
//! policy runs. Above `mounts` and `run_args`, whose parsers it uses.

use super::mounts::{mount_kind, parse_mount_string, MountRequest};
use crate::devcontainer::model::MountEntry;
use crate::paths::normalize_path;
use crate::run_spec::MountKind;
use std::path::{Path, PathBuf};

/// The host paths of every bind a config and its metadata entries ask for (mounts, `-v`,
/// `--mount`), folded: where they really lead is a fact `policy_facts` reads before the policy
/// judges them (`Eval::inside_repository`). What does not parse is left to the policy's error.
pub(crate) fn bind_sources(
    config: &crate::devcontainer::model::DevContainer,
    entries: &[(
        crate::devcontainer::metadata::Origin,
        crate::devcontainer::metadata::Entry,
    )],
) -> Vec<PathBuf> {
    let mounts = entries
        .iter()
        .flat_map(|(_, e)| &e.mounts)
        .chain(&config.mounts)
        .filter_map(|m| match m {
            MountEntry::Text(text) => parse_mount_string(text).ok(),
            MountEntry::Object(o) => mount_kind(&o.kind).ok().map(|kind| MountRequest {
                kind,
                source: o.source.clone().unwrap_or_default(),
                target: o.target.clone(),
                read_only: false,
            }),
        });
    let run_args = super::run_args::mount_requests(&config.run_args);
    mounts
        .chain(run_args)
        .filter(|m| m.kind == MountKind::Bind)
        .filter_map(|m| normalize_path(Path::new(&m.source)))
        .collect()
}
