//! The file watcher: records what changes in the workspace while a session runs, as `file`
//! events in their own log (`GuardConfig::file_watch`). It runs in the guard because the guard
//! keeps running without the CLI and the agent cannot reach it: the workspace is mounted
//! read-only here, and the log is written to the host's data folder.
//!
//! Why `notify` (its inotify backend) rather than scans: inotify tells what changed as it
//! changes, including a file that is written and removed between two looks. Each folder is
//! watched on its own (not notify's recursive mode), so that a folder that cannot be watched is
//! counted, `.git/objects` is left out, and a folder created later is read at once for what was
//! written into it before its watch existed.
//!
//! Changes to one path within [`DEBOUNCE`] are one record (`created` then `modified` is
//! `created`; `deleted` then `created` is `modified`; `created` then `deleted` is `deleted`).
//! Then, per folder and kind of change, the first record is written as it is and the ones after
//! it, while they keep coming, are folded into one record a second (`path` is the folder with a
//! trailing `/`, with `count`, `first`, `last` and the total `size`). A path matching one of the
//! sensitive globs is always a record of its own. The log has a size cap (`writer::Writer`).
//!
//! Not seen: the content of a change (only its kind and size); `.git/objects` (git's own
//! content-addressed store, nothing in it runs on the host); folders past the inotify watch
//! limit, or past the guard's own cap of a quarter of it (`MAX_WATCHES`), or unreadable by the
//! guard's root (a `guard` record `file_watch_incomplete` says how
//! many); what is written below a mount of its own over the workspace (named volumes) or
//! through a symbolic link (never followed); changes while the guard is down; and, when the
//! kernel's event queue overflows, the changes in between (`file_watch_overflow`).

use crate::error::{Error, Result};
use crate::events::{guard_event, Events};
use crate::writer::Writer;
use chrono::{DateTime, Utc};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use notify::event::{ModifyKind, RenameMode};
use notify::{EventKind as Kind, INotifyWatcher, RecursiveMode, Watcher};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use yolo_protocol::event::EventKind;
use yolo_protocol::FileWatch;

/// A path's changes closer together than this are one record.
pub const DEBOUNCE: Duration = Duration::from_millis(300);
/// A path changing without pause is written at least this often.
const MAX_WAIT: Duration = Duration::from_secs(2);
/// How often folded records are written.
const FLUSH: Duration = Duration::from_secs(1);
/// A folder quiet this long writes its next change as a record of its own again.
const FOLD_WINDOW: Duration = Duration::from_secs(2);
const TICK: Duration = Duration::from_millis(100);
/// Events taken from the queue between two looks at what is due.
const BATCH: usize = 20_000;
/// How long the guard's start waits for the folders already there to be watched, so the agent
/// does not start before: about 30 µs a folder (measured), so 2 s covers some 60,000 folders;
/// a larger workspace is watched on while the agent starts.
const FIRST_WALK: Duration = Duration::from_secs(2);
/// Not watched: git's object store (see the module doc).
const SKIPPED: [&str; 1] = [".git/objects"];
/// The inotify watch limit of this user namespace, and of the host's (they can differ: the
/// lower one binds).
const WATCH_LIMITS: [&str; 2] = [
    "/proc/sys/user/max_inotify_watches",
    "/proc/sys/fs/inotify/max_user_watches",
];
/// The most watches one guard takes: a quarter of the user's limit (`watch_cap`), within these
/// bounds. The guard is root on the host without a user namespace, so its watches count against
/// the limit of every root process there; folders the agent makes by the hundred thousand must
/// not use it all up (other guards, systemd and root's editors need watches too).
const MAX_WATCHES: u64 = 65_536;
const MIN_WATCHES: u64 = 1_024;
/// How often the watches are counted again (from the kernel) once the count reached the cap:
/// folders removed since gave theirs back.
const RECOUNT: Duration = Duration::from_secs(1);
/// Folders left out at the cap that are remembered, to be watched once there is room again.
const MAX_SKIPPED: usize = 4_096;

/// The running watcher; dropping it writes what is pending and stops it.
pub struct FileWatcher {
    stop: Arc<AtomicBool>,
    /// Set once the folders present at the start are watched.
    ready: Arc<(Mutex<bool>, Condvar)>,
    done: Arc<(Mutex<bool>, Condvar)>,
}

impl FileWatcher {
    /// Wait until the folders present at the start are watched (at most `limit`).
    pub fn wait_ready(&self, limit: Duration) {
        wait(&self.ready, limit);
    }
}

fn wait(flag: &(Mutex<bool>, Condvar), limit: Duration) {
    let (set, signal) = flag;
    let set = set.lock().unwrap_or_else(|p| p.into_inner());
    let _ = signal.wait_timeout_while(set, limit, |set| !*set);
}

fn raise(flag: &(Mutex<bool>, Condvar)) {
    let (set, signal) = flag;
    *set.lock().unwrap_or_else(|p| p.into_inner()) = true;
    signal.notify_all();
}

impl Drop for FileWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        wait(&self.done, Duration::from_secs(2));
    }
}

/// Start watching `config.root` in a thread of its own, once the folders there are watched (or
/// [`FIRST_WALK`] passed). A failure is recorded as a `guard`
/// event (`file_watch_failed`) in the guard's log and is not fatal: the firewall goes on.
pub fn spawn(
    config: &FileWatch,
    session: &str,
    phase: Option<&str>,
    guard: &Events,
) -> Option<FileWatcher> {
    match start(config, session, phase) {
        Ok(watcher) => {
            watcher.wait_ready(FIRST_WALK);
            Some(watcher)
        }
        Err(e) => {
            guard.emit(guard_event(
                "file_watch_failed",
                [("error", e.to_string().into())],
            ));
            None
        }
    }
}

fn start(config: &FileWatch, session: &str, phase: Option<&str>) -> Result<FileWatcher> {
    let writer = Writer::open(&config.log_path, session, Some(config.max_bytes))?.in_phase(phase);
    let root = config.root.clone();
    if !root.is_dir() {
        return Err(Error::other(format!(
            "the workspace {} is not mounted in the guard",
            root.display()
        )));
    }
    let (tx, rx) = mpsc::channel();
    let watcher = INotifyWatcher::new(tx, notify::Config::default())
        .map_err(|e| Error::other(format!("cannot start inotify: {e}")))?;
    let sensitive = sensitive_set(&config.sensitive);
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new((Mutex::new(false), Condvar::new()));
    let done = Arc::new((Mutex::new(false), Condvar::new()));
    let (stop2, ready2, done2) = (Arc::clone(&stop), Arc::clone(&ready), Arc::clone(&done));
    std::thread::Builder::new()
        .name("yolo-files".into())
        .spawn(move || {
            let mut run = Run {
                root,
                watcher,
                changes: Changes::new(sensitive),
                writer,
                over_limit: 0,
                unreadable: 0,
                reported_unwatched: 0,
                overflows: 0,
                reported_overflows: 0,
                watches: 0,
                cap: watch_cap(),
                counted: std::time::Instant::now(),
                skipped: std::collections::VecDeque::new(),
            };
            run.serve(rx, &stop2, &ready2);
            raise(&done2);
        })
        .map_err(|e| Error::other(format!("cannot start the file watcher: {e}")))?;
    Ok(FileWatcher { stop, ready, done })
}

/// The globs of `FileWatch::sensitive`, matched ignoring case; a bad one is left out (the CLI
/// checked them).
fn sensitive_set(globs: &[String]) -> GlobSet {
    let mut builder = GlobSetBuilder::new();
    for g in globs {
        if let Ok(glob) = GlobBuilder::new(g).case_insensitive(true).build() {
            builder.add(glob);
        }
    }
    builder.build().unwrap_or_else(|_| GlobSet::empty())
}

struct Run {
    root: PathBuf,
    watcher: INotifyWatcher,
    changes: Changes,
    writer: Writer,
    /// Folders that could not be watched: past the inotify limit, or unreadable to the guard's
    /// root (it has no `DAC_READ_SEARCH`); and their total last recorded.
    over_limit: u64,
    unreadable: u64,
    reported_unwatched: u64,
    /// inotify queue overflows (changes lost), and the number last recorded.
    overflows: u64,
    reported_overflows: u64,
    /// Watches taken (an upper bound between two counts from the kernel), the most this guard
    /// takes, and when they were last counted.
    watches: u64,
    cap: u64,
    counted: std::time::Instant,
    /// Folders left out at the cap, oldest first (at most `MAX_SKIPPED`).
    skipped: std::collections::VecDeque<PathBuf>,
}

impl Run {
    fn serve(
        &mut self,
        rx: Receiver<notify::Result<notify::Event>>,
        stop: &AtomicBool,
        ready: &(Mutex<bool>, Condvar),
    ) {
        let root = self.root.clone();
        self.watch_tree(&root, false);
        self.report_unwatched();
        raise(ready);
        let mut next_flush = Utc::now() + FLUSH;
        loop {
            let stopping = stop.load(Ordering::Relaxed);
            match rx.recv_timeout(TICK) {
                Ok(event) => self.take(event),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            // Bounded, so that a flood cannot keep records from being written.
            for _ in 0..BATCH {
                let Ok(event) = rx.try_recv() else { break };
                self.take(event);
            }
            let now = Utc::now();
            for record in self.changes.settled(now, stopping, &self.root) {
                self.write(record);
            }
            if stopping || now >= next_flush {
                next_flush = now + FLUSH;
                for record in self.changes.flush(now) {
                    self.write(record);
                }
                self.rewatch();
                self.report_unwatched();
                self.report_overflows();
                let _ = self.writer.report_suppressed(stopping);
            }
            if stopping {
                return;
            }
        }
    }

    fn write(&self, record: EventKind) {
        if let Err(e) = self.writer.write(record) {
            eprintln!("yolo-guard: cannot write the file log: {e}");
        }
    }

    fn take(&mut self, event: notify::Result<notify::Event>) {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                if matches!(e.kind, notify::ErrorKind::MaxFilesWatch) {
                    self.over_limit += 1;
                }
                return;
            }
        };
        if event.need_rescan() {
            self.overflows += 1;
            return;
        }
        let now = Utc::now();
        let rel = |p: &Path| relative(&self.root, p);
        match event.kind {
            Kind::Create(kind) => {
                let Some(path) = event.paths.first() else {
                    return;
                };
                let Some(r) = rel(path) else { return };
                self.changes.offer(r, Change::Created, None, now);
                if matches!(kind, notify::event::CreateKind::Folder) {
                    self.watch_tree(&path.clone(), true);
                }
            }
            Kind::Modify(ModifyKind::Name(RenameMode::Both)) => {
                let (Some(from), Some(to)) = (event.paths.first(), event.paths.get(1)) else {
                    return;
                };
                let (Some(from_rel), Some(to_rel)) = (rel(from), rel(to)) else {
                    return;
                };
                self.changes.renamed(&from_rel, to_rel, now);
                if is_real_dir(to) {
                    self.watch_tree(&to.clone(), false);
                }
            }
            // A rename's two halves: `Both` above records a pair; a half without its other
            // is a move out of (`From`) or into (`To`) the watched folders.
            Kind::Modify(ModifyKind::Name(RenameMode::From)) => {
                if let Some(r) = event.paths.first().and_then(|p| rel(p)) {
                    self.changes.moved_out(r, now);
                }
            }
            Kind::Modify(ModifyKind::Name(RenameMode::To)) => {
                let Some(path) = event.paths.first() else {
                    return;
                };
                if let Some(r) = rel(path) {
                    self.changes.moved_in(r, now);
                }
                if is_real_dir(path) {
                    self.watch_tree(&path.clone(), true);
                }
            }
            Kind::Modify(ModifyKind::Data(_) | ModifyKind::Metadata(_) | ModifyKind::Any) => {
                if let Some(r) = event.paths.first().and_then(|p| rel(p)) {
                    self.changes.offer(r, Change::Modified, None, now);
                }
            }
            Kind::Remove(_) => {
                if let Some(r) = event.paths.first().and_then(|p| rel(p)) {
                    self.changes.offer(r, Change::Deleted, None, now);
                }
            }
            _ => {}
        }
    }

    /// Watch `dir` and every folder below it; with `new`, what is already in it was written
    /// before its watch existed, so it is recorded as created.
    fn watch_tree(&mut self, dir: &Path, new: bool) {
        let mut stack = vec![dir.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let rel = relative(&self.root, &dir).unwrap_or_default();
            if SKIPPED.iter().any(|s| rel == *s) || !is_real_dir(&dir) {
                continue;
            }
            if !self.room_for_a_watch() {
                // Nor are the folders below it walked: the agent may have made them by the
                // hundred thousand. `over_limit` counts at least this one; it is watched (and
                // walked) once there is room (`rewatch`), so that filling the cap, making a
                // folder and removing the filler does not leave that folder unwatched.
                self.over_limit += 1;
                if self.skipped.len() < MAX_SKIPPED {
                    self.skipped.push_back(dir);
                }
                continue;
            }
            match self.watcher.watch(&dir, RecursiveMode::NonRecursive) {
                Ok(()) => self.watches += 1,
                Err(e) => match &e.kind {
                    notify::ErrorKind::MaxFilesWatch => self.over_limit += 1,
                    notify::ErrorKind::Io(io)
                        if io.kind() == std::io::ErrorKind::PermissionDenied =>
                    {
                        self.unreadable += 1
                    }
                    _ => {} // gone already: nothing to watch
                },
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if new {
                    if let Some(r) = relative(&self.root, &path) {
                        self.changes.offer(r, Change::Created, None, Utc::now());
                    }
                }
                // Symbolic links are not followed: their targets are not the workspace's.
                if kind.is_dir() {
                    stack.push(path);
                }
            }
        }
    }

    /// Watch the folders left out at the cap, oldest first, while there is room: what is in one
    /// now was written while it had no watch, so it is recorded as created.
    fn rewatch(&mut self) {
        while !self.skipped.is_empty() && self.room_for_a_watch() {
            let Some(dir) = self.skipped.pop_front() else {
                break;
            };
            self.watch_tree(&dir, true);
        }
    }

    /// Whether another watch stays within the cap. At the cap the watches are counted again
    /// from the kernel (at most once a `RECOUNT`): folders removed since gave theirs back.
    fn room_for_a_watch(&mut self) -> bool {
        if self.watches < self.cap {
            return true;
        }
        if self.counted.elapsed() >= RECOUNT {
            self.counted = std::time::Instant::now();
            if let Some(n) = inotify_watches() {
                self.watches = n;
            }
        }
        self.watches < self.cap
    }

    /// A `file_watch_overflow` record (at most one a flush) when the queue overflowed again.
    fn report_overflows(&mut self) {
        if self.overflows == self.reported_overflows {
            return;
        }
        self.reported_overflows = self.overflows;
        self.write(guard_event(
            "file_watch_overflow",
            [("count", self.overflows.into())],
        ));
    }

    /// A `file_watch_incomplete` record when more folders went unwatched since the last one.
    fn report_unwatched(&mut self) {
        let unwatched = self.over_limit + self.unreadable;
        if unwatched == self.reported_unwatched {
            return;
        }
        self.reported_unwatched = unwatched;
        let limit = watch_limit();
        self.write(guard_event(
            "file_watch_incomplete",
            [
                ("unwatched_folders", unwatched.into()),
                ("over_limit", self.over_limit.into()),
                ("unreadable", self.unreadable.into()),
                ("max_user_watches", limit.into()),
                ("max_watches", self.cap.into()),
            ],
        ));
    }
}

/// The most watches this guard takes: a quarter of the lower of the user's limits, within
/// `MIN_WATCHES..=MAX_WATCHES`.
fn watch_cap() -> u64 {
    watch_limit().map_or(MAX_WATCHES, |limit| {
        (limit / 4).clamp(MIN_WATCHES, MAX_WATCHES)
    })
}

/// The inotify watch limit that binds: the lower of the user namespace's and the host's.
fn watch_limit() -> Option<u64> {
    WATCH_LIMITS
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok()?.trim().parse::<u64>().ok())
        .min()
}

/// The watches this process holds, as the kernel counts them: the `inotify wd:` lines of the
/// inotify descriptors' fdinfo (the file watcher's is the guard's only one).
fn inotify_watches() -> Option<u64> {
    let mut total = 0;
    let mut found = false;
    for entry in std::fs::read_dir("/proc/self/fd").ok()?.flatten() {
        let is_inotify = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.as_os_str() == "anon_inode:inotify");
        if !is_inotify {
            continue;
        }
        found = true;
        let info = std::path::Path::new("/proc/self/fdinfo").join(entry.file_name());
        let text = std::fs::read_to_string(info).ok()?;
        total += text
            .lines()
            .filter(|l| l.starts_with("inotify wd:"))
            .count() as u64;
    }
    found.then_some(total)
}

/// A folder, not a symbolic link to one: a link the agent planted could point anywhere in the
/// guard's own file system.
fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// `path` relative to `root`, `/`-separated; `None` for the root itself or outside it.
fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let text = rel.to_string_lossy().replace('\\', "/");
    (!text.is_empty()).then_some(text)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Change {
    Created,
    Modified,
    Deleted,
    Renamed,
}

impl Change {
    fn name(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Modified => "modified",
            Change::Deleted => "deleted",
            Change::Renamed => "renamed",
        }
    }

    /// What `self` followed by `next` within the debounce amounts to.
    fn then(self, next: Change) -> Change {
        use Change::*;
        match (self, next) {
            (Created, Modified | Created) => Created,
            (Deleted, Created) => Modified,
            (Renamed, Modified) => Renamed,
            (_, next) => next,
        }
    }
}

struct Pending {
    change: Change,
    from: Option<String>,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
}

/// Changes per folder and kind being folded.
struct Bucket {
    count: u64,
    size: u64,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    /// The last change of this key, written or folded.
    seen: DateTime<Utc>,
}

/// Debouncing per path and folding per folder: pure, over relative paths and times (sizes are
/// read from `root` when a record is made).
struct Changes {
    sensitive: GlobSet,
    pending: HashMap<String, Pending>,
    buckets: HashMap<(String, Change), Bucket>,
}

impl Changes {
    fn new(sensitive: GlobSet) -> Self {
        Changes {
            sensitive,
            pending: HashMap::new(),
            buckets: HashMap::new(),
        }
    }

    fn offer(&mut self, path: String, change: Change, from: Option<String>, now: DateTime<Utc>) {
        match self.pending.get_mut(&path) {
            Some(p) => {
                p.change = p.change.then(change);
                if from.is_some() {
                    p.from = from;
                }
                p.last = now;
            }
            None => {
                self.pending.insert(
                    path,
                    Pending {
                        change,
                        from,
                        first: now,
                        last: now,
                    },
                );
            }
        }
    }

    fn renamed(&mut self, from: &str, to: String, now: DateTime<Utc>) {
        // A path created and renamed within the debounce appears under its new name.
        let was = self.pending.remove(from);
        match was {
            Some(p) if p.change == Change::Created => self.offer(to, Change::Created, None, now),
            _ => self.offer(to, Change::Renamed, Some(from.to_string()), now),
        }
    }

    fn moved_out(&mut self, path: String, now: DateTime<Utc>) {
        self.offer(path, Change::Deleted, None, now);
    }

    fn moved_in(&mut self, path: String, now: DateTime<Utc>) {
        // The `To` half of a pair comes before `Both`, which replaces it as a rename.
        if !self.pending.contains_key(&path) {
            self.offer(path, Change::Created, None, now);
        }
    }

    fn is_sensitive(&self, path: &str) -> bool {
        self.sensitive.is_match(path)
    }

    /// Records for the paths quiet for [`DEBOUNCE`] (or changing for [`MAX_WAIT`]); `all`: every
    /// pending path.
    fn settled(&mut self, now: DateTime<Utc>, all: bool, root: &Path) -> Vec<EventKind> {
        let debounce = chrono::Duration::from_std(DEBOUNCE).unwrap_or_default();
        let max_wait = chrono::Duration::from_std(MAX_WAIT).unwrap_or_default();
        // In the order the changes began, so the log reads in time order.
        let mut ready: Vec<(DateTime<Utc>, String)> = self
            .pending
            .iter()
            .filter(|(_, p)| all || now - p.last >= debounce || now - p.first >= max_wait)
            .map(|(path, p)| (p.first, path.clone()))
            .collect();
        ready.sort();
        let mut out = vec![];
        for (_, path) in ready {
            let Some(p) = self.pending.remove(&path) else {
                continue;
            };
            let size = match p.change {
                Change::Deleted => None,
                _ => std::fs::symlink_metadata(root.join(&path))
                    .ok()
                    .filter(|m| m.is_file())
                    .map(|m| m.len()),
            };
            let sensitive =
                self.is_sensitive(&path) || p.from.as_deref().is_some_and(|f| self.is_sensitive(f));
            if sensitive {
                out.push(record(path, p.change, p.from, size, true));
                continue;
            }
            let folder = match path.rfind('/') {
                Some(i) => path[..i + 1].to_string(),
                None => "./".to_string(),
            };
            let fold_window = chrono::Duration::from_std(FOLD_WINDOW).unwrap_or_default();
            match self.buckets.get_mut(&(folder.clone(), p.change)) {
                Some(b) if now - b.seen < fold_window => {
                    if b.count == 0 {
                        b.first = p.first;
                    }
                    b.count += 1;
                    b.size += size.unwrap_or(0);
                    b.last = p.last;
                    b.seen = now;
                }
                _ => {
                    self.buckets.insert(
                        (folder, p.change),
                        Bucket {
                            count: 0,
                            size: 0,
                            first: now,
                            last: now,
                            seen: now,
                        },
                    );
                    out.push(record(path, p.change, p.from, size, false));
                }
            }
        }
        out
    }

    /// One folded record per folder and kind with changes since the last flush; forgets the
    /// quiet ones.
    fn flush(&mut self, now: DateTime<Utc>) -> Vec<EventKind> {
        let fold_window = chrono::Duration::from_std(FOLD_WINDOW).unwrap_or_default();
        let mut out = vec![];
        for ((folder, change), b) in self.buckets.iter_mut() {
            if b.count == 0 {
                continue;
            }
            out.push(EventKind::File {
                path: folder.clone(),
                change: change.name().into(),
                from: None,
                size: Some(b.size),
                sensitive: false,
                count: Some(b.count),
                first: Some(b.first),
                last: Some(b.last),
            });
            b.count = 0;
            b.size = 0;
        }
        self.buckets
            .retain(|_, b| b.count > 0 || now - b.seen < fold_window);
        out
    }
}

fn record(
    path: String,
    change: Change,
    from: Option<String>,
    size: Option<u64>,
    sensitive: bool,
) -> EventKind {
    EventKind::File {
        path,
        change: change.name().into(),
        from,
        size,
        sensitive,
        count: None,
        first: None,
        last: None,
    }
}

#[cfg(test)]
#[path = "files_tests.rs"]
mod tests;
