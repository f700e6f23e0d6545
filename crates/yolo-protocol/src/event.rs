//! The event schema, documented in docs/audit-log.md. Keep the two in step.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Event {
    pub ts: DateTime<Utc>,
    pub session: String,
    /// `build` for what the guard saw while an image build's RUN steps shared its network
    /// namespace; absent for the agent's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    /// An event of `session` stamped now.
    pub fn now(session: &str, kind: EventKind) -> Event {
        Event {
            ts: Utc::now(),
            session: session.to_string(),
            phase: None,
            kind,
        }
    }

    /// The event stamped with the phase it happened in (see `GuardConfig::phase`).
    pub fn in_phase(mut self, phase: Option<&str>) -> Event {
        self.phase = phase.map(str::to_string);
        self
    }

    /// The event as one JSON line, newline included: what every writer appends with a single
    /// `write` so concurrent writers never tear each other's lines.
    pub fn to_line(&self) -> Vec<u8> {
        // An Event is strings, numbers and JSON values: serializing it cannot fail.
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    SessionStart {
        workspace: String,
        config_file: String,
        config_hash: String,
        image: String,
        container: String,
        limits: serde_json::Value,
        grants: Vec<String>,
        #[serde(default)]
        network: String,
        #[serde(default)]
        allowlist: Vec<String>,
        /// SHA-256 fingerprints (`sha256:<hex>`) of the extra CA certificates the user had
        /// the image and the container trust.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        extra_ca: Vec<String>,
    },
    SessionStop {
        reason: String,
    },
    /// A command yolo ran in the container or on the host.
    Command {
        /// hook, exec, shell, agent, host, setup
        source: String,
        name: String,
        argv: Vec<String>,
        user: String,
        cwd: String,
        started: DateTime<Utc>,
        exit_code: Option<i64>,
        duration_ms: u64,
    },
    /// A DNS query the guard answered.
    Dns {
        name: String,
        qtype: String,
        /// allowed, refused, malformed, error
        decision: String,
        #[serde(default)]
        answers: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rcode: Option<String>,
        /// `allowed`: the allowlist entry that allowed the name (absent for a name only
        /// `--network open` let through, and in logs written before it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        entry: Option<String>,
        /// Past the log's cap: this record stands for `count` lookups under this allowlist
        /// entry (`*`: no entry) that were not written one by one (other names, repeats);
        /// `name` and the rest are the first of them, a sample.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sample_of: Option<String>,
        /// Aggregated record: how many occurrences this record stands for (absent: one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        /// Aggregated record: when the first and the last of them happened.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first: Option<DateTime<Utc>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last: Option<DateTime<Utc>>,
    },
    /// A packet the firewall dropped.
    Blocked {
        proto: String,
        dst: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
        /// The name that last resolved to `dst`, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Past the log's cap: this record stands for `count` attempts to destinations in
        /// this address block (`203.0.0.0/8`) that were not written one by one; `dst`, `port`
        /// and `name` are the first of them, a sample.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sample_of: Option<String>,
        /// Aggregated record: how many occurrences this record stands for (absent: one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        /// Aggregated record: when the first and the last of them happened.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first: Option<DateTime<Utc>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last: Option<DateTime<Utc>>,
    },
    /// A connection to a destination outside the allowlist that `--network open` let through.
    Connection {
        proto: String,
        dst: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Aggregated record: how many occurrences this record stands for (absent: one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        /// Aggregated record: when the first and the last of them happened.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first: Option<DateTime<Utc>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last: Option<DateTime<Utc>>,
    },
    /// The allowlist of a running session changed (`yolo allow` / `yolo deny`).
    Firewall {
        action: String,
        patterns: Vec<String>,
    },
    /// The guard's own life: started (with ruleset verification time), stopped, errors.
    Guard {
        status: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        details: BTreeMap<String, serde_json::Value>,
    },
    /// A file of the repository that the host runs (`.envrc`, a Makefile, `package.json`,
    /// `.gitattributes`...) or that redirects the host's git (`.git/commondir`) changed while the
    /// container could write it. Written by the CLI when it looks (after `run`, `exec`, `shell`,
    /// and before `up` and `down`).
    WatchedFile {
        /// Relative to the mounted folder.
        path: String,
        /// added, modified, removed
        change: String,
        /// Git would read its config or hooks through this path (a planted `commondir`).
        #[serde(default)]
        git: bool,
        /// A unified diff of the text (with the repository's control characters escaped), or
        /// empty for a large or binary file.
        #[serde(default)]
        diff: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256_before: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256_after: Option<String>,
    },
    /// A program started in the agent container (`execve`/`execveat`), seen by the guard's
    /// exec supervisor before it ran. `argv` is what the kernel ran (read at the exec itself,
    /// so a thread rewriting it cannot make the log differ); for a script that is the
    /// interpreter's argv, the script's path in it.
    Exec {
        /// Unique in the session; the `exec_exit` of this program names it.
        id: u64,
        pid: i32,
        ppid: i32,
        uid: u32,
        gid: u32,
        /// The path the caller asked for, as the kernel executed it (`AT_EXECFN`): for
        /// `execveat` on a descriptor that is `/dev/fd/N` and `exe` says what the descriptor was.
        /// For an exec that did not run, the caller's path (a descriptor resolved to what it
        /// pointed to).
        path: String,
        /// The binary the kernel mapped (the interpreter of a script); absent when it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exe: Option<String>,
        argv: Vec<String>,
        cwd: String,
        /// `ok`, or the error the caller got (`ENOENT`, `EACCES`...), or `refused` when the
        /// supervisor refused it (its log could not be written).
        result: String,
        /// The argv in memory before the exec differed from what the kernel ran: something
        /// rewrote it in between (the logged `argv` is what ran).
        #[serde(default, skip_serializing_if = "is_false")]
        argv_rewritten: bool,
        /// `argv` was cut (too many or too long arguments); `argc` says how many there were.
        #[serde(default, skip_serializing_if = "is_false")]
        truncated: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        argc: Option<u64>,
        /// SHA-256 (hex) of the binary the kernel mapped (`exe`), read through the process's own
        /// handle on it, so a file renamed over a path or a memfd is hashed as what ran. Absent
        /// when the exec did not run, or when the hash was not ready at the exec: it then follows
        /// in an `exec_digest` record of the same `id`, which the reader joins here.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
        /// Names of the dynamic loader's variables in the new program's environment
        /// (`LD_PRELOAD`, `LD_AUDIT`, `LD_LIBRARY_PATH`, any `LD_*`, `GCONV_PATH`,
        /// `GLIBC_TUNABLES`): code other than `exe` may run in it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        loader_env: Vec<String>,
        /// `/etc/ld.so.preload` existed in the program's root at the exec: every dynamically
        /// linked program loads the libraries it names.
        #[serde(default, skip_serializing_if = "is_false")]
        ld_so_preload: bool,
        /// What `/etc/ld.so.preload` named, as the guard read it at the exec (once, through
        /// the program's root): at most 16 entries of at most 256 bytes, from its first 4 KiB.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ld_so_preload_paths: Vec<String>,
        /// The values of `LD_PRELOAD`, `LD_AUDIT` and `LD_LIBRARY_PATH` in the new program's
        /// environment, each cut to 1 KiB: the code the loader is told to load, or where to
        /// look for it. The libraries named by path here and in `ld_so_preload_paths` are
        /// hashed: `exec_digest` records with `library`.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        loader_values: BTreeMap<String, String>,
        /// Signals pending when the program was let go at its exec (`SIGSTOP`...): it could be
        /// held before reading its arguments, and another process could change them after this
        /// record.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pending_signals: Vec<String>,
        /// Filled by the reader from the matching `exec_exit` (the guard writes `null`): always
        /// present in `yolo audit --json`, `null` while the program runs or when it never ran.
        #[serde(default)]
        exit_code: Option<i64>,
        #[serde(default)]
        duration_ms: Option<u64>,
    },
    /// The process of an `exec` ended (or exec'd another program, which has its own `exec`).
    ExecExit {
        /// The `exec` record's id.
        id: u64,
        pid: i32,
        /// The exit status, or 128 + the signal that killed it.
        exit_code: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
        duration_ms: u64,
    },
    /// The second part of an `exec` whose binary's hash was not ready when it was recorded:
    /// computed off the exec's path from the process's own handle on the binary.
    ExecDigest {
        /// The `exec` record's id.
        id: u64,
        pid: i32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
        /// The binary changed (its ctime moved) between the exec and the end of the hash, or
        /// could have changed unseen (it was changed in the clock tick of the exec and the
        /// program no longer ran it when the hash ended): the hash is not surely of what ran.
        #[serde(default, skip_serializing_if = "is_false")]
        changed: bool,
        /// Why there is no hash: the file could not be read, or `too large (unhashed): …`
        /// past the hasher's 64 GiB.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Not the program's binary: a library the loader was told to preload into it
        /// (`ld_so_preload_paths`, `LD_PRELOAD`, `LD_AUDIT`), by its path in the program's
        /// root, opened at the exec. One record per library.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        library: Option<String>,
    },
    /// A process in the agent container runs without the exec filter (something started it
    /// with a plain `docker exec`, or an editor attached): its execs are not recorded.
    Unsupervised {
        pid: i32,
        ppid: i32,
        uid: u32,
        exe: String,
        argv: Vec<String>,
    },
    /// A change in the workspace, seen by the guard's file watcher (inotify) while the session
    /// ran. Changes below one folder that come in bursts are folded into one record with the
    /// folder as `path` and `count`; a `sensitive` path is always a record of its own.
    File {
        /// Relative to the workspace; a folded record's path ends with `/`.
        path: String,
        /// created, modified, deleted, renamed
        change: String,
        /// For `renamed`: the old path.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        /// Bytes after the change (absent for `deleted` and folders); for a folded record, the
        /// total of its files.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
        /// A path the host executes or reads as configuration (the read-only and watched lists),
        /// or the same file as one (`links`).
        #[serde(default)]
        sensitive: bool,
        /// The sensitive paths this change is a change of too: hard links to the same file, and
        /// the path through a link to the file or a folder above it (`.git/hooks ->
        /// ../tools/hooks` makes `tools/hooks/pre-commit` `.git/hooks/pre-commit`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        links: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first: Option<DateTime<Utc>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last: Option<DateTime<Utc>>,
    },
    /// A Dev Container Feature fetched (or found in yolo's cache) on the host, before the image
    /// build that installs it. Written by the CLI.
    FeatureFetch {
        /// The Feature as devcontainer.json (or a Feature's `dependsOn`) names it.
        reference: String,
        /// sha256 of its content (`sha256:...`), the lock file's `integrity`.
        digest: String,
        /// Taken from yolo's cache: nothing was downloaded or copied.
        cached: bool,
        /// The size of its files.
        bytes: u64,
    },
    /// A request on an inspected host, as the guard's proxy handled it (forwarded or refused).
    /// Written by the guard.
    Http {
        method: String,
        host: String,
        /// The request's path, the query string cut (it often carries tokens).
        path: String,
        /// The status the agent got: the host's, or the proxy's own (403 refused by a rule,
        /// 421 another host than the connection's, 502 the host could not be reached or its
        /// certificate was not trusted).
        status: u16,
        /// Body bytes each way (the agent's request body, the response body).
        bytes_up: u64,
        bytes_down: u64,
        duration_ms: u64,
        /// The rule that decided (`connect`, `host`: the proxy's own refusals).
        rule: String,
        /// The credential whose real value the proxy put in: its name, never its value.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credential: Option<String>,
        /// The guard's proxy refused the request (its own 403, the rule in `rule`), rather
        /// than the host answering `status` (absent: false).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        refused: bool,
        /// Aggregated record: how many requests this record stands for (absent: one); the
        /// sizes and duration are the first one's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first: Option<DateTime<Utc>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last: Option<DateTime<Utc>>,
    },
    /// A credential's stand-in sent to a host that is not one of that credential's: refused.
    /// Written by the guard, besides the request's `http` record.
    CredentialMisuse {
        /// The credential's name.
        credential: String,
        host: String,
        method: String,
        path: String,
    },
    /// Something yolo wants on record that fits no other kind (warnings, refusals).
    Notice {
        message: String,
    },
    /// Events of kind `of` not written because the session log reached its size cap: `count`
    /// of them (so far: a later record of the same `of` repeats the total), between `first`
    /// and `last`.
    Suppressed {
        of: String,
        count: u64,
        first: DateTime<Utc>,
        last: DateTime<Utc>,
        /// The cap, in bytes.
        max_bytes: u64,
    },
    /// A writer's last record in its file (`crate::chain`): how many records come before it
    /// in the file, so that `yolo audit verify` sees a cut at the end.
    ChainEnd {
        records: u64,
    },
    /// A question held for the user's answer (`[firewall] on_refused = "ask"`): a DNS lookup of
    /// a name outside the allowlist, and what became of it.
    Approval {
        /// The pending question's id (`yolo approvals`, `yolo allow --pending ID`).
        id: u64,
        /// `dns`.
        what: String,
        name: String,
        /// `asked`, `allowed`, `denied`, `timed_out`.
        decision: String,
        /// Who decided: the host user and the command (absent for `asked` and `timed_out`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        /// How an allow holds: `session` (this session's allowlist), `user config`,
        /// `devcontainer.json`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        how: Option<String>,
    },
}

impl EventKind {
    /// Every `kind` tag, in schema order: what `yolo audit --kind` accepts.
    pub const NAMES: &'static [&'static str] = &[
        "session_start",
        "session_stop",
        "command",
        "dns",
        "blocked",
        "connection",
        "firewall",
        "guard",
        "watched_file",
        "exec",
        "exec_exit",
        "exec_digest",
        "unsupervised",
        "file",
        "feature_fetch",
        "http",
        "credential_misuse",
        "notice",
        "suppressed",
        "chain_end",
        "approval",
    ];

    /// The `kind` tag, for filtering.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::SessionStart { .. } => "session_start",
            EventKind::SessionStop { .. } => "session_stop",
            EventKind::Command { .. } => "command",
            EventKind::Dns { .. } => "dns",
            EventKind::Blocked { .. } => "blocked",
            EventKind::Connection { .. } => "connection",
            EventKind::Firewall { .. } => "firewall",
            EventKind::Guard { .. } => "guard",
            EventKind::WatchedFile { .. } => "watched_file",
            EventKind::Exec { .. } => "exec",
            EventKind::ExecExit { .. } => "exec_exit",
            EventKind::ExecDigest { .. } => "exec_digest",
            EventKind::Unsupervised { .. } => "unsupervised",
            EventKind::File { .. } => "file",
            EventKind::FeatureFetch { .. } => "feature_fetch",
            EventKind::Http { .. } => "http",
            EventKind::CredentialMisuse { .. } => "credential_misuse",
            EventKind::Notice { .. } => "notice",
            EventKind::Suppressed { .. } => "suppressed",
            EventKind::ChainEnd { .. } => "chain_end",
            EventKind::Approval { .. } => "approval",
        }
    }

    /// How many occurrences this record stands for: `count` of an aggregated record, else one.
    pub fn count(&self) -> u64 {
        match (self, self.folded()) {
            (EventKind::Suppressed { count, .. }, _) => *count,
            (_, Some(folded)) => folded.count.unwrap_or(1),
            _ => 1,
        }
    }

    /// The folding fields of the kinds an agent can repeat at will (`dns`, `blocked`, `file`,
    /// `connection`); `None` for the other kinds.
    pub fn folded(&self) -> Option<Folded> {
        match self {
            EventKind::Dns {
                count, first, last, ..
            }
            | EventKind::Blocked {
                count, first, last, ..
            }
            | EventKind::Connection {
                count, first, last, ..
            }
            | EventKind::File {
                count, first, last, ..
            }
            | EventKind::Http {
                count, first, last, ..
            } => Some(Folded {
                count: *count,
                first: *first,
                last: *last,
            }),
            _ => None,
        }
    }

    /// Make this the aggregated record of `count` occurrences from `first` to `last` (a kind
    /// that does not fold stays as it is).
    pub fn set_folded(&mut self, n: u64, from: DateTime<Utc>, to: DateTime<Utc>) {
        if let EventKind::Dns {
            count, first, last, ..
        }
        | EventKind::Blocked {
            count, first, last, ..
        }
        | EventKind::Connection {
            count, first, last, ..
        }
        | EventKind::File {
            count, first, last, ..
        }
        | EventKind::Http {
            count, first, last, ..
        } = self
        {
            *count = Some(n);
            *first = Some(from);
            *last = Some(to);
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What an aggregated record adds to its kind: how many occurrences it stands for (absent: one),
/// and when the first and the last of them happened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Folded {
    pub count: Option<u64>,
    pub first: Option<DateTime<Utc>>,
    pub last: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One event of every kind; `name()`'s exhaustive match makes a new kind fail to compile
    /// until it has a tag, and this test fails until the tag is in `NAMES`.
    fn one_of_each() -> Vec<EventKind> {
        let s = String::new;
        vec![
            EventKind::SessionStart {
                workspace: s(),
                config_file: s(),
                config_hash: s(),
                image: s(),
                container: s(),
                limits: serde_json::Value::Null,
                grants: vec![],
                network: s(),
                allowlist: vec![],
                extra_ca: vec![],
            },
            EventKind::SessionStop { reason: s() },
            EventKind::Command {
                source: s(),
                name: s(),
                argv: vec![],
                user: s(),
                cwd: s(),
                started: Utc::now(),
                exit_code: None,
                duration_ms: 0,
            },
            EventKind::Dns {
                name: s(),
                qtype: s(),
                decision: s(),
                answers: vec![],
                rcode: None,
                entry: None,
                sample_of: None,
                count: None,
                first: None,
                last: None,
            },
            EventKind::Blocked {
                proto: s(),
                dst: s(),
                port: None,
                name: None,
                sample_of: None,
                count: None,
                first: None,
                last: None,
            },
            EventKind::Connection {
                proto: s(),
                dst: s(),
                port: None,
                name: None,
                count: None,
                first: None,
                last: None,
            },
            EventKind::Firewall {
                action: s(),
                patterns: vec![],
            },
            EventKind::Guard {
                status: s(),
                details: BTreeMap::new(),
            },
            EventKind::WatchedFile {
                path: s(),
                change: s(),
                git: false,
                diff: s(),
                sha256_before: None,
                sha256_after: None,
            },
            EventKind::Exec {
                id: 0,
                pid: 0,
                ppid: 0,
                uid: 0,
                gid: 0,
                path: s(),
                exe: None,
                argv: vec![],
                cwd: s(),
                result: s(),
                argv_rewritten: false,
                truncated: false,
                argc: None,
                sha256: None,
                loader_env: vec![],
                ld_so_preload: false,
                ld_so_preload_paths: Vec::new(),
                loader_values: Default::default(),
                pending_signals: vec![],
                exit_code: None,
                duration_ms: None,
            },
            EventKind::ExecExit {
                id: 0,
                pid: 0,
                exit_code: 0,
                signal: None,
                duration_ms: 0,
            },
            EventKind::ExecDigest {
                id: 0,
                pid: 0,
                sha256: None,
                changed: false,
                error: None,
                library: None,
            },
            EventKind::Unsupervised {
                pid: 0,
                ppid: 0,
                uid: 0,
                exe: s(),
                argv: vec![],
            },
            EventKind::File {
                path: s(),
                change: s(),
                from: None,
                size: None,
                sensitive: false,
                links: vec![],
                count: None,
                first: None,
                last: None,
            },
            EventKind::FeatureFetch {
                reference: s(),
                digest: s(),
                cached: false,
                bytes: 0,
            },
            EventKind::Http {
                method: s(),
                host: s(),
                path: s(),
                status: 200,
                bytes_up: 0,
                bytes_down: 0,
                duration_ms: 0,
                rule: s(),
                credential: None,
                refused: false,
                count: None,
                first: None,
                last: None,
            },
            EventKind::CredentialMisuse {
                credential: s(),
                host: s(),
                method: s(),
                path: s(),
            },
            EventKind::Notice { message: s() },
            EventKind::Suppressed {
                of: s(),
                count: 0,
                first: Utc::now(),
                last: Utc::now(),
                max_bytes: 0,
            },
            EventKind::ChainEnd { records: 0 },
            EventKind::Approval {
                id: 1,
                what: s(),
                name: s(),
                decision: s(),
                by: None,
                how: None,
            },
        ]
    }

    #[test]
    fn names_are_every_kind_tag_as_serialized() {
        let tags: Vec<String> = one_of_each()
            .iter()
            .map(|kind| {
                let json = serde_json::to_value(kind).unwrap();
                assert_eq!(json["kind"], kind.name());
                kind.name().to_string()
            })
            .collect();
        assert_eq!(tags, EventKind::NAMES);
    }

    /// Lines written before aggregation existed still read, as one occurrence each; an
    /// aggregated record carries its count and times at the top level.
    #[test]
    fn aggregated_records_add_fields_old_readers_and_lines_can_ignore() {
        let old = r#"{"ts":"2025-03-04T10:15:02Z","session":"s","kind":"blocked","proto":"tcp","dst":"192.0.2.1","port":80}"#;
        let event: Event = serde_json::from_str(old).unwrap();
        assert_eq!(event.kind.count(), 1);
        let t: DateTime<Utc> = "2025-03-04T10:15:03Z".parse().unwrap();
        let folded = EventKind::Blocked {
            proto: "tcp".into(),
            dst: "192.0.2.1".into(),
            port: Some(80),
            name: None,
            sample_of: None,
            count: Some(1999),
            first: Some(t),
            last: Some(t),
        };
        let json = serde_json::to_value(&folded).unwrap();
        assert_eq!(json["count"], 1999);
        assert_eq!(json["first"], "2025-03-04T10:15:03Z");
        assert!(!serde_json::to_string(&event.kind)
            .unwrap()
            .contains("count"));
        let back: EventKind = serde_json::from_value(json).unwrap();
        assert_eq!(back.count(), 1999);
    }
}
