//! The named volumes a session's containers mount, made before the containers so they carry
//! yolo's labels (Docker would make them unlabelled on first use).

use crate::engine::Engine;
use crate::error::Result;
use crate::run_spec::{MountKind, RunSpec};

/// Named volumes of `spec` (the workspace's too, when it is one), made up front so they carry
/// yolo's labels (and `YOLO_LABELS`).
pub(crate) async fn create(engine: &Engine, spec: &RunSpec) -> Result<()> {
    let workspace = std::iter::once(&spec.workspace_mount);
    let names: std::collections::BTreeSet<&str> = workspace
        .chain(&spec.mounts)
        // An anonymous volume (no source) is Docker's to make with the container.
        .filter(|m| m.kind == MountKind::Volume && !m.source.is_empty())
        .map(|m| m.source.as_str())
        .collect();
    let made = names
        .into_iter()
        .map(|name| engine.create_volume(name, &spec.devcontainer_id));
    // At once: one API round trip each, independent of the others.
    futures_util::future::try_join_all(made).await?;
    Ok(())
}
