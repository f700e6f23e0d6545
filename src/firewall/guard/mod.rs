//! `yolo guard`: runs inside the guard container, which owns the network namespace.

pub mod control;
pub mod dns;
pub mod events;
pub mod names;
pub mod nflog;
pub mod sets;
