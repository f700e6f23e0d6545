//! The one builder of `exec` records for the tests of the readers, the report and the run
//! summary: a plain program that ran, with the fields a test cares about set by name.

use yolo_protocol::event::EventKind;

/// An `exec` record: what `Default` gives is `/usr/bin/true` run by root in `/workspace`, ok,
/// still running.
pub(crate) struct Exec<'a> {
    pub(crate) id: u64,
    pub(crate) pid: i32,
    pub(crate) ppid: i32,
    /// The uid and the gid.
    pub(crate) uid: u32,
    pub(crate) path: &'a str,
    pub(crate) exe: Option<&'a str>,
    pub(crate) argv: &'a [&'a str],
    pub(crate) cwd: &'a str,
    pub(crate) result: &'a str,
    pub(crate) exit_code: Option<i64>,
    pub(crate) duration_ms: Option<u64>,
}

impl Default for Exec<'_> {
    fn default() -> Self {
        Exec {
            id: 0,
            pid: 2,
            ppid: 1,
            uid: 0,
            path: "/usr/bin/true",
            exe: Some("/usr/bin/true"),
            argv: &["true"],
            cwd: "/workspace",
            result: "ok",
            exit_code: None,
            duration_ms: None,
        }
    }
}

impl Exec<'_> {
    pub(crate) fn kind(self) -> EventKind {
        EventKind::Exec {
            id: self.id,
            pid: self.pid,
            ppid: self.ppid,
            uid: self.uid,
            gid: self.uid,
            path: self.path.into(),
            exe: self.exe.map(str::to_string),
            argv: self.argv.iter().map(|s| s.to_string()).collect(),
            cwd: self.cwd.into(),
            result: self.result.into(),
            argv_rewritten: false,
            truncated: false,
            argc: None,
            sha256: None,
            loader_env: Vec::new(),
            ld_so_preload: false,
            ld_so_preload_paths: Vec::new(),
            loader_values: Default::default(),
            pending_signals: Vec::new(),
            exit_code: self.exit_code,
            duration_ms: self.duration_ms,
        }
    }
}
