//! devcontainer.json support: find it, parse it (JSONC), substitute variables, compute the
//! `${devcontainerId}`. Pure: no Docker, no policy decisions.

pub mod discover;
pub mod id;
pub mod model;
pub mod parse;
pub mod substitute;
