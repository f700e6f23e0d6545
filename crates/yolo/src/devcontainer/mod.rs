//! devcontainer.json support: find it, parse it (JSONC), substitute variables, compute the
//! `${devcontainerId}` and the names yolo derives from it. Pure: no Docker, no policy decisions.

pub mod discover;
pub mod id;
pub mod model;
pub(crate) mod names;
pub mod parse;
pub mod substitute;
