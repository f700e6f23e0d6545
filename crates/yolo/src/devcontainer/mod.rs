//! devcontainer.json support: find it, parse it (JSONC), substitute variables, compute the
//! `${devcontainerId}` and the names yolo derives from it. Pure: no Docker, no policy decisions.

pub(crate) mod discover;
pub(crate) mod features;
pub(crate) mod id;
pub(crate) mod metadata;
pub(crate) mod model;
pub(crate) mod names;
pub(crate) mod parse;
pub(crate) mod properties;
pub(crate) mod substitute;
