//! Where the repository appears in the container (`workspaceMount`) and where commands run
//! (`workspaceFolder`). The repository, or its git root, needs no grant; any other source does.

use super::mounts::{parse_mount_string, valid_volume_name};
use super::Eval;
use crate::devcontainer::model::DevContainer;
use crate::error::{Error, Result};
use crate::paths::{is_container_path, normalize_path, slash_path};
use crate::run_spec::{Mount, MountKind};
use std::path::{Path, PathBuf};

impl Eval<'_> {
    /// The workspace bind and the folder commands run in.
    pub(super) fn workspace(&mut self) -> Result<(Mount, String)> {
        let mut mount = Mount {
            kind: MountKind::Bind,
            source: self.workspace_str(),
            target: default_workspace_target(self.input.workspace),
            read_only: false,
        };
        if let Some(text) = &self.config.workspace_mount {
            mount = self.workspace_mount(text)?;
        }
        let folder = match &self.config.workspace_folder {
            Some(folder) if is_container_path(folder) => folder.clone(),
            Some(folder) => {
                return Err(self.config_error(
                    "workspaceFolder",
                    format!("\"{folder}\" must be an absolute path in the container"),
                ))
            }
            None => default_folder(&mount, self.input.workspace),
        };
        Ok((mount, folder))
    }

    fn workspace_mount(&mut self, text: &str) -> Result<Mount> {
        let property = "workspaceMount";
        let req = parse_mount_string(text).map_err(|e| self.config_error(property, e))?;
        if !is_container_path(&req.target) {
            return Err(self.config_error(property, "the target must be an absolute path"));
        }
        match req.kind {
            MountKind::Bind => {}
            // A named volume as the workspace (the repository cloned into it, say): it holds
            // no host file, so it needs no grant.
            MountKind::Volume if valid_volume_name(&req.source) => {
                return Ok(Mount {
                    kind: MountKind::Volume,
                    source: req.source,
                    target: req.target,
                    read_only: req.read_only,
                })
            }
            MountKind::Volume => {
                return Err(self.config_error(
                    property,
                    format!(
                        "a volume workspace needs a volume name (source=NAME), and \"{}\" is not one",
                        req.source
                    ),
                ))
            }
            _ => {
                return Err(Error::Unsupported {
                    file: self.file(),
                    property: property.into(),
                    message: "only a bind mount of the repository (type=bind) or a named volume (type=volume) is supported".into(),
                })
            }
        }
        let source = self.host_path(property, &req.source)?;
        let own = source == self.input.workspace || Some(&source) == self.git_root.as_ref();
        if !own {
            self.require_host_path(property, &source, &req.target)?;
        }
        Ok(Mount {
            kind: MountKind::Bind,
            source: source.to_string_lossy().into_owned(),
            target: req.target,
            read_only: req.read_only,
        })
    }
}

/// The host folder the workspace mount binds (`Eval::workspace`), for the caller to look at
/// before evaluating (`Facts`): `workspaceMount`'s source, else the workspace; `None` for a
/// volume, or a `workspaceMount` the evaluation refuses anyway.
pub(crate) fn workspace_source(config: &DevContainer, workspace: &Path) -> Option<PathBuf> {
    let Some(text) = &config.workspace_mount else {
        return Some(workspace.to_path_buf());
    };
    let req = parse_mount_string(text).ok()?;
    if req.kind != MountKind::Bind {
        return None;
    }
    normalize_path(Path::new(&req.source))
}

/// Where the workspace is mounted without a `workspaceMount`: `/workspaces/<folder name>`, as
/// VS Code and the reference CLI do (`getWorkspaceConfiguration`), so `devcontainer exec` and
/// VS Code's attach land in the same folder. Unlike them, yolo mounts the folder it was started
/// for, not the git root above it: only what the user pointed yolo at reaches the agent.
pub(crate) fn default_workspace_target(workspace: &Path) -> String {
    let name = workspace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "workspace".into());
    format!("/workspaces/{name}")
}

/// What a volume workspace leaves out, said once at load: the host's repository is not in the
/// container, and what yolo does with a bound repository needs a bind.
pub(super) fn volume_note(mount: &Mount) -> Vec<String> {
    if mount.kind != MountKind::Volume {
        return Vec::new();
    }
    vec![format!(
        "workspaceMount is the volume \"{}\" at {}: the host's repository is not mounted, so yolo's read-only paths ([workspace] read_only) and the file audit of the repository are off for it",
        crate::visible::escape_controls(&mount.source),
        mount.target
    )]
}

/// The mount's target, plus the workspace's place below the mounted folder (when the repository
/// mounts its git root and yolo was started in a subfolder).
fn default_folder(mount: &Mount, workspace: &Path) -> String {
    let below = workspace
        .strip_prefix(&mount.source)
        .ok()
        .map(slash_path)
        .unwrap_or_default();
    if below.is_empty() {
        mount.target.clone()
    } else {
        format!("{}/{below}", mount.target.trim_end_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::error::Error;
    use serde_json::json;

    #[test]
    fn workspace_folder_and_mount_target_move() {
        let spec = ok(with_image(json!({"workspaceFolder": "/src/app"})));
        assert_eq!(
            (
                spec.workspace_mount.target.as_str(),
                spec.workspace_folder.as_str()
            ),
            ("/workspaces/My Repo", "/src/app")
        );
        let mount = format!("source={WS},target=/src,type=bind,consistency=cached");
        let spec = ok(with_image(json!({"workspaceMount": mount})));
        assert_eq!(spec.workspace_mount.target, "/src");
        assert_eq!(spec.workspace_folder, "/src");
        assert!(!spec.workspace_mount.read_only);
        let spec = ok(with_image(
            json!({"workspaceMount": format!("{mount},readonly")}),
        ));
        assert!(spec.workspace_mount.read_only);
        let (property, _) = config_err(case(with_image(json!({"workspaceFolder": "rel"}))).run());
        assert_eq!(property, "workspaceFolder");
    }

    #[test]
    fn workspace_mount_elsewhere_needs_host_mount() {
        let c = case(with_image(
            json!({"workspaceMount": "source=/home/me,target=/w,type=bind"}),
        ));
        let (property, _, grant) = refused(c.run());
        assert_eq!(property, "workspaceMount");
        assert_grant_text(&grant, "host-mount=/home/me");
        assert_eq!(
            c.grant(&["host-mount"])
                .run()
                .unwrap()
                .workspace_mount
                .source,
            "/home/me"
        );
        let tmpfs = case(with_image(
            json!({"workspaceMount": "target=/w,type=tmpfs"}),
        ));
        assert!(matches!(tmpfs.run(), Err(Error::Unsupported { .. })));
    }

    #[test]
    fn a_named_volume_can_be_the_workspace_with_a_note() {
        let spec = ok(with_image(
            json!({"workspaceMount": "source=proj-src,target=/w,type=volume"}),
        ));
        assert_eq!(
            spec.workspace_mount.kind,
            crate::run_spec::MountKind::Volume
        );
        assert_eq!(spec.workspace_mount.source, "proj-src");
        assert_eq!(spec.workspace_folder, "/w");
        assert!(spec.protected.is_empty());
        assert!(
            spec.notes[0].contains("read-only paths"),
            "{:?}",
            spec.notes
        );
        let (property, _) = config_err(
            case(with_image(
                json!({"workspaceMount": "source=/x y,target=/w,type=volume"}),
            ))
            .run(),
        );
        assert_eq!(property, "workspaceMount");
    }

    #[test]
    fn workspace_mount_of_git_root_is_allowed() {
        let root = std::path::Path::new("/home/me/src/repo");
        let workspace = root.join("sub");
        let mut c = case(with_image(json!({
            "workspaceMount": format!("source={},target=/repo,type=bind", root.display())
        })));
        c.workspace = workspace.clone();
        c.config_file = workspace.join(".devcontainer/devcontainer.json");
        let config = serde_json::from_value(c.config.clone()).unwrap();
        c.facts = Some(crate::policy::Facts {
            git_root: Some(root.to_path_buf()),
            ..nothing_on_disk(&config, &workspace)
        });
        let spec = c.run().unwrap();
        assert_eq!(spec.workspace_mount.source, root.to_string_lossy());
        assert_eq!(spec.workspace_folder, "/repo/sub");
        assert!(spec.grants_used.is_empty());
    }
}
