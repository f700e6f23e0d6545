//! The image's `devcontainer.metadata` label for `up`: read from the engine, parsed
//! (`devcontainer::metadata::parse_label`), its warnings printed. What the entries mean is the
//! policy's business (`policy::metadata`, through `Project::with_metadata`).

use crate::devcontainer::metadata::{parse_label, Entry, Origin};
use crate::engine::Engine;
use crate::error::Result;
use crate::project::Project;

/// The entries of `image`'s label; none when the image is not there (yet) or has no label. A
/// malformed label or entry is a warning naming the image, never an error: the image is the
/// user's choice, not something the repository can fix.
pub(crate) async fn of_image(engine: &Engine, image: &str) -> Result<Vec<(Origin, Entry)>> {
    let Some(text) = engine.metadata_label(image).await? else {
        return Ok(Vec::new());
    };
    let (entries, warnings) = parse_label(image, &text);
    for warning in warnings {
        eprintln!("{} {warning}", console::style("warning:").yellow().bold());
    }
    Ok(entries)
}

/// `project` with the metadata of `image` in front of its Features' entries (kept from an
/// earlier `with_metadata`; the image's own label entries are replaced), or `None` when that
/// changes nothing.
pub(crate) async fn with_image(
    engine: &Engine,
    project: &Project,
    image: &str,
) -> Result<Option<Project>> {
    // Compose makes the dev service's image: its label is read by `compose::start`, once it is there.
    if project.spec.compose.is_some() {
        return Ok(None);
    }
    let mut entries = of_image(engine, image).await?;
    let features = project
        .metadata()
        .iter()
        .filter(|(origin, _)| matches!(origin, Origin::Feature { .. }));
    entries.extend(features.cloned());
    if entries == project.metadata() {
        return Ok(None);
    }
    project.with_metadata(entries).map(Some)
}
