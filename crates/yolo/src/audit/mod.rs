//! The audit log: one JSON-lines file per session under `<data dir>/sessions/`. Only this module
//! writes it. Events are appended with one `write` each (O_APPEND), so the host CLI and the guard
//! can append to the same file concurrently without tearing lines.

pub(crate) use yolo_protocol::event;
pub(crate) mod cast;
pub(crate) mod line;
pub(crate) mod reader;
pub(crate) mod report;
pub(crate) mod writer;

pub(crate) use event::{Event, EventKind};
pub(crate) use writer::Writer;

use std::path::PathBuf;

/// `<data dir>/sessions`.
pub(crate) fn sessions_dir() -> PathBuf {
    crate::user_config::data_dir().join("sessions")
}

/// `<data dir>/sessions/<session>.jsonl`.
pub(crate) fn session_path(session: &str) -> PathBuf {
    sessions_dir().join(format!("{session}.jsonl"))
}

/// `<data dir>/sessions/<session>/`: a session's own folder (terminal recordings, the report).
pub(crate) fn session_dir(session: &str) -> PathBuf {
    sessions_dir().join(session)
}

/// `<data dir>/network`: the guard's own files (it cannot write the host's session file).
pub(crate) fn network_dir() -> PathBuf {
    crate::user_config::data_dir().join("network")
}

/// Every file holding a session's events: the host's and the guard's (network, execs, files).
pub(crate) fn session_files(session: &str) -> Vec<PathBuf> {
    vec![
        session_path(session),
        network_dir().join(format!("{session}.jsonl")),
        network_dir().join(exec_log_name(session)),
        network_dir().join(file_log_name(session)),
    ]
}

/// The guard's exec log of a session, in `network_dir()` (the guard sees it under its log dir).
pub(crate) fn exec_log_name(session: &str) -> String {
    format!("{session}.exec.jsonl")
}

/// The guard's file-change log of a session, in `network_dir()`.
pub(crate) fn file_log_name(session: &str) -> String {
    format!("{session}.files.jsonl")
}
