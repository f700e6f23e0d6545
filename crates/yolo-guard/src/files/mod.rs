//! The file audit: what changes in the workspace while a session runs (`watcher`), written as
//! `file` events to a log of its own.

mod watcher;

pub(crate) use watcher::spawn;
