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
//! A write that raises no `IN_MODIFY` (through a shared `mmap`) still ends in `IN_CLOSE_WRITE`
//! when the file is let go: for a sensitive file the watcher then compares what it holds (size,
//! times, and a hash of a small file's content) with what it knew, and records a change when
//! they differ. Sensitive files are known by inode too: a hard link to one, or a path below a
//! link to one or to a folder above it (`.git/hooks -> ../tools/hooks`), is sensitive as well,
//! and its record names the sensitive paths (`links`).
//!
//! The paths the watcher holds are the agent's to name, so every table of them has a budget of
//! bytes (`Budget`), and no path past [`MAX_PATH`] is looked at: what does not fit is counted
//! (`over_memory`, `unrecorded`), never held, so the guard cannot be made to run out of memory.
//!
//! Folders past the inotify watch limit are watched once there is room again: the first
//! `MAX_SKIPPED` left out one by one, and, when more were left out, by a walk of the whole
//! workspace. Folders deeper than `PATH_MAX` are reached through descriptors of folders above
//! them (`Fs`), so depth hides nothing.
//!
//! Not seen: the content of a change (only its kind and size); `.git/objects` (git's own
//! content-addressed store, nothing in it runs on the host); folders past the inotify watch
//! limit, or past the guard's own cap of a quarter of it (`MAX_WATCHES`), unreadable by the
//! guard's root, or deeper than `MAX_ANCHORS` descriptors reach, until they can be watched (a
//! `guard` record `file_watch_incomplete` says how many, and names the first); what is written
//! below a mount of its own over the workspace (named volumes) or through a symbolic link to
//! outside the workspace; changes while the guard is down; and, when the kernel's event queue
//! overflows, the changes in between (`file_watch_overflow`). yolo's look at the watched files
//! after each command (the CLI's `watched` module) compares them whatever the watcher saw.

use crate::audit::events::{guard_event, Events};
use crate::audit::writer::Writer;
use crate::error::{Error, Result};
use chrono::{DateTime, Utc};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{EventKind as Kind, INotifyWatcher, RecursiveMode, Watcher};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fs::Metadata;
use std::hash::{BuildHasher, Hasher};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use std::time::Instant;
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
/// Events waiting between notify's thread and the watcher's, at most, and the bytes of their
/// paths (`Budget`).
const QUEUE: usize = 32_768;
const QUEUE_BYTES: usize = 8 << 20;
/// What the watcher's tables may hold of the paths the agent names (`Budget`): folders watched
/// (notify keeps two copies of each more), folders left out to watch later, folders a walk has
/// yet to read, paths being debounced, folders being folded, and sensitive files and links.
const WATCHED_BYTES: usize = 16 << 20;
const SKIPPED_BYTES: usize = 2 << 20;
const WALK_BYTES: usize = 8 << 20;
const PENDING_BYTES: usize = 12 << 20;
/// Of the changes being debounced, those to a sensitive path (or renamed from one) have a
/// budget of their own: a flood of other changes cannot leave them only counted.
const SENSITIVE_PENDING_BYTES: usize = 2 << 20;
const BUCKET_BYTES: usize = 4 << 20;
const KNOWN_BYTES: usize = 8 << 20;
/// The longest path (full, in bytes) the watcher looks at: a folder deeper is left out as too
/// deep, a change there is not recorded (and counted). Paths past `PATH_MAX` are reached
/// through descriptors, so without it a path, and every table entry holding one, could be
/// megabytes long.
const MAX_PATH: usize = 16 << 10;
/// What a table spends on an entry besides its path's bytes, about.
const ENTRY: usize = 128;
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
/// Folders left out at the cap that are remembered, to be watched once there is room again;
/// past it, the whole workspace is walked again then.
const MAX_SKIPPED: usize = 4_096;
/// Such walks are at least this far apart, and ten times as far as the last one took: the
/// agent, filling and emptying folders, must not keep the guard walking.
const MIN_REWALK: Duration = Duration::from_secs(5);
/// The longest path handed to the kernel: a folder's, with a name (255 bytes) appended, stays
/// within `PATH_MAX` (4,096). A longer one is reached through a descriptor (`Fs`).
const SHORT: usize = 3_584;
/// Descriptors held for folders deeper than that; past them, deeper folders are left out.
const MAX_ANCHORS: usize = 512;
/// Sensitive files known by inode, and links tracked; past them, the rest is counted
/// (`untracked` in `file_watch_incomplete`).
const MAX_KNOWN: usize = 100_000;
const MAX_LINKS: usize = 10_000;
/// A sensitive file up to this size is known by a hash of its content too (a write through
/// `mmap` on tmpfs changes neither size nor times); a larger one by size, times and inode.
const MAX_HASHED: u64 = 1 << 20;
/// Bytes the first walk reads to hash sensitive files; past it, they are known without a hash.
const FIRST_HASH_BUDGET: u64 = 64 << 20;
/// Folders left out that the `file_watch_incomplete` record names.
const NAMED: usize = 10;

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

/// Bytes of the paths one of the watcher's tables holds, within that table's budget. The agent
/// names the paths: long ones by the ten thousand (70,000 folders of 3.5 KiB paths, made in
/// two seconds) filled the guard's 256 MiB until it was killed, taking the session with it.
/// What does not fit is left out and counted, as at the watch cap.
#[derive(Debug)]
struct Budget {
    used: usize,
    max: usize,
}

impl Budget {
    fn new(max: usize) -> Budget {
        Budget { used: 0, max }
    }

    /// Whether a path of `len` bytes fits.
    fn fits(&self, len: usize) -> bool {
        self.used + len + ENTRY <= self.max
    }

    /// Room for a path of `len` bytes taken; false, and nothing taken, without room.
    fn take(&mut self, len: usize) -> bool {
        if !self.fits(len) {
            return false;
        }
        self.used += len + ENTRY;
        true
    }

    /// A path of `len` bytes taken before is let go.
    fn give(&mut self, len: usize) {
        self.used = self.used.saturating_sub(len + ENTRY);
    }
}

/// The bytes of an event's paths, as the queue's budget counts them.
fn event_bytes(event: &notify::Result<notify::Event>) -> usize {
    match event {
        Ok(event) => event.paths.iter().map(|p| p.as_os_str().len()).sum(),
        Err(_) => 0,
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
    // Bounded: notify's thread drains the kernel's queue as fast as the agent fills it, and
    // an unbounded channel behind it grew until the guard was killed for its memory (a loop
    // exchanging two names, about a million events a second). Past `QUEUE`, events are
    // dropped and counted as an overflow, as the kernel's own queue does.
    // The paths' bytes are bounded too (`QUEUE_BYTES`): each can be kilobytes long.
    let (tx, rx) = mpsc::sync_channel(QUEUE);
    let dropped = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = Arc::clone(&dropped);
    let queued = Arc::new(AtomicUsize::new(0));
    let held = Arc::clone(&queued);
    let handler = move |event: notify::Result<notify::Event>| {
        // Only what `Run::take` acts on is queued: the watcher's own reads of the folders it
        // walks raise an open event each, which would fill the queue it cannot empty while it
        // walks, and the overflow would start the walk again.
        if let Ok(e) = &event {
            if matches!(e.kind, Kind::Access(a) if a != AccessKind::Close(AccessMode::Write))
                && !e.need_rescan()
            {
                return;
            }
        }
        let bytes = event_bytes(&event) + ENTRY;
        if held.fetch_add(bytes, Ordering::Relaxed) + bytes > QUEUE_BYTES
            || tx.try_send(event).is_err()
        {
            held.fetch_sub(bytes, Ordering::Relaxed);
            counted.fetch_add(1, Ordering::Relaxed);
        }
    };
    let watcher = INotifyWatcher::new(handler, notify::Config::default())
        .map_err(|e| Error::other(format!("cannot start inotify: {e}")))?;
    let changes = Changes::new(
        sensitive_set(&config.sensitive),
        sensitive_set(&yolo_protocol::folder_patterns(&config.sensitive)),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new((Mutex::new(false), Condvar::new()));
    let done = Arc::new((Mutex::new(false), Condvar::new()));
    let (stop2, ready2, done2) = (Arc::clone(&stop), Arc::clone(&ready), Arc::clone(&done));
    std::thread::Builder::new()
        .name("yolo-files".into())
        .spawn(move || {
            let mut run = Run::new(Fs::new(root), watcher, changes, writer, dropped, queued);
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

/// The workspace as the kernel is asked about it. A path longer than [`SHORT`] (past
/// `PATH_MAX`, the kernel would refuse it: `ENAMETOOLONG`) is reached through a descriptor
/// held for a folder above it, as `/proc/self/fd/N/rest`; the watches put there report their
/// events by that name, which [`Fs::logical`] turns back into the workspace's.
struct Fs {
    root: PathBuf,
    /// `root` with its links resolved, to tell whether a link leads into the workspace.
    real_root: PathBuf,
    /// Descriptors (`O_PATH`) of deep folders, by their full path, and the other way round.
    anchors: BTreeMap<PathBuf, OwnedFd>,
    by_fd: HashMap<i32, PathBuf>,
}

/// Why a folder cannot be reached.
enum Unreachable {
    /// Deeper than the descriptors held reach.
    TooDeep,
    /// Gone, or not a folder (a link).
    Gone,
}

impl Fs {
    fn new(root: PathBuf) -> Fs {
        Fs {
            real_root: root.canonicalize().unwrap_or_else(|_| root.clone()),
            root,
            anchors: BTreeMap::new(),
            by_fd: HashMap::new(),
        }
    }

    /// A path the kernel takes for `path` (full, however long): itself when short enough,
    /// or through the deepest descriptor held above it. An anchored folder itself is
    /// `/proc/self/fd/N/.`, so that looking at it does not stop at the descriptor's own link.
    fn short(&self, path: &Path) -> Option<PathBuf> {
        let fits = |p: &Path| p.as_os_str().len() < libc::PATH_MAX as usize;
        if path.as_os_str().len() <= SHORT {
            return Some(path.to_path_buf());
        }
        let anchored = path
            .ancestors()
            .find_map(|above| Some((above, self.anchors.get(above)?)))
            .and_then(|(above, fd)| {
                let rest = path.strip_prefix(above).ok()?;
                Some(fd_path(fd.as_raw_fd()).join(".").join(rest))
            });
        match anchored {
            Some(short) if fits(&short) => Some(short),
            _ => fits(path).then(|| path.to_path_buf()),
        }
    }

    /// `short` for the folder `dir`, taking a descriptor of it when it is too deep for one
    /// held: opened through its parent's short path, without following a link.
    fn reach(&mut self, dir: &Path) -> std::result::Result<PathBuf, Unreachable> {
        if let Some(short) = self.short(dir).filter(|s| s.as_os_str().len() <= SHORT) {
            return Ok(short);
        }
        if self.anchors.len() >= MAX_ANCHORS {
            return Err(Unreachable::TooDeep);
        }
        let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
            return Err(Unreachable::Gone);
        };
        let parent = self
            .short(parent)
            .map(|p| p.join(name))
            .filter(|p| p.as_os_str().len() < libc::PATH_MAX as usize)
            .ok_or(Unreachable::TooDeep)?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(parent)
            .map_err(|_| Unreachable::Gone)?;
        let fd = OwnedFd::from(file);
        let short = fd_path(fd.as_raw_fd()).join(".");
        self.by_fd.insert(fd.as_raw_fd(), dir.to_path_buf());
        self.anchors.insert(dir.to_path_buf(), fd);
        Ok(short)
    }

    /// The full path of `path`, which may be a short one through a descriptor.
    fn logical(&self, path: &Path) -> PathBuf {
        let Ok(rest) = path.strip_prefix("/proc/self/fd") else {
            return path.to_path_buf();
        };
        let mut parts = rest.components();
        let fd = parts
            .next()
            .and_then(|c| c.as_os_str().to_str()?.parse::<i32>().ok());
        match fd.and_then(|fd| self.by_fd.get(&fd)) {
            // `components` leaves out the `.` after the descriptor.
            Some(dir) => dir.join(parts.collect::<PathBuf>()),
            None => path.to_path_buf(),
        }
    }

    /// What `rel` is now, not following a link; `None` when it is gone (or out of reach).
    fn lstat(&self, rel: &str) -> Option<Metadata> {
        std::fs::symlink_metadata(self.short(&self.root.join(rel))?).ok()
    }

    /// Let go of the descriptors of `dir` and the folders below it: it is gone (or moved).
    fn forget_below(&mut self, dir: &Path) {
        let gone: Vec<PathBuf> = self
            .anchors
            .range(dir.to_path_buf()..)
            .take_while(|(p, _)| p.starts_with(dir))
            .map(|(p, _)| p.clone())
            .collect();
        for path in gone {
            if let Some(fd) = self.anchors.remove(&path) {
                self.by_fd.remove(&fd.as_raw_fd());
            }
        }
    }
}

fn fd_path(fd: i32) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{fd}"))
}

struct Run {
    fs: Fs,
    watcher: INotifyWatcher,
    changes: Changes,
    writer: Writer,
    /// Folders that could not be watched: past the inotify limit, unreadable to the guard's
    /// root (it has no `DAC_READ_SEARCH`), or deeper than the descriptors held reach; and
    /// left out because the tables of paths were full (`Budget`).
    over_limit: u64,
    over_memory: u64,
    unreadable: u64,
    too_deep: u64,
    /// The first folders left out (relative), for the record.
    left_out: Vec<String>,
    /// The folders left out and the files untracked at the last `file_watch_incomplete`.
    reported_unwatched: (u64, u64),
    /// inotify queue overflows (changes lost), and the number last recorded.
    overflows: u64,
    /// Events dropped at the full queue between notify and this thread (each an overflow).
    dropped: Arc<std::sync::atomic::AtomicU64>,
    /// The bytes of the events in the queue (`QUEUE_BYTES`).
    queued: Arc<AtomicUsize>,
    reported_overflows: u64,
    /// `Changes::shed` at the last `file_watch_overflow`.
    reported_shed: u64,
    /// Watches taken (an upper bound between two counts from the kernel), the most this guard
    /// takes, and when they were last counted.
    watches: u64,
    cap: u64,
    counted: Instant,
    /// The folders watched, by full path (as notify forgets a folder removed or moved away, and
    /// what is below it, so does this).
    watched: BTreeSet<PathBuf>,
    watched_bytes: Budget,
    /// Folders left out at the cap, oldest first (at most `MAX_SKIPPED`).
    skipped: VecDeque<PathBuf>,
    skipped_bytes: Budget,
    /// A folder left out at the cap was not remembered, or events were lost (an overflow): the
    /// whole workspace is walked again once there is room, not before `next_rewalk`.
    lost: bool,
    next_rewalk: Instant,
    /// A walk of the whole workspace after events were lost is under way: a folder already in
    /// `watched` is watched again (it may have been removed and made anew meanwhile, its
    /// removal's event among those lost, and its new self never watched).
    rewalking: bool,
}

impl Run {
    fn new(
        fs: Fs,
        watcher: INotifyWatcher,
        changes: Changes,
        writer: Writer,
        dropped: Arc<std::sync::atomic::AtomicU64>,
        queued: Arc<AtomicUsize>,
    ) -> Run {
        Run {
            fs,
            watcher,
            changes,
            writer,
            over_limit: 0,
            over_memory: 0,
            unreadable: 0,
            too_deep: 0,
            left_out: Vec::new(),
            reported_unwatched: (0, 0),
            overflows: 0,
            dropped,
            queued,
            reported_overflows: 0,
            reported_shed: 0,
            watches: 0,
            cap: watch_cap(),
            counted: Instant::now(),
            watched: BTreeSet::new(),
            watched_bytes: Budget::new(WATCHED_BYTES),
            skipped: VecDeque::new(),
            skipped_bytes: Budget::new(SKIPPED_BYTES),
            lost: false,
            next_rewalk: Instant::now(),
            rewalking: false,
        }
    }

    fn serve(
        &mut self,
        rx: Receiver<notify::Result<notify::Event>>,
        stop: &AtomicBool,
        ready: &(Mutex<bool>, Condvar),
    ) {
        let root = self.fs.root.clone();
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
            for record in self.changes.settled(now, stopping, &self.fs) {
                self.write(record);
            }
            if stopping || now >= next_flush {
                next_flush = now + FLUSH;
                for record in self.changes.flush(now) {
                    self.write(record);
                }
                if !stopping {
                    self.rewatch();
                }
                self.report_unwatched();
                self.report_overflows();
                let _ = self.writer.report_suppressed(stopping);
            }
            if stopping {
                let _ = self.writer.close();
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
        self.queued
            .fetch_sub(event_bytes(&event) + ENTRY, Ordering::Relaxed);
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
            // As for a dropped event (`report_overflows`).
            self.lost = true;
            return;
        }
        let now = Utc::now();
        // Full paths: a watch through a descriptor names its events by the descriptor.
        let paths: Vec<PathBuf> = event.paths.iter().map(|p| self.fs.logical(p)).collect();
        let rel = |p: &Path| relative(&self.fs.root, p);
        let Some(path) = paths.first().cloned() else {
            return;
        };
        if paths.iter().any(|p| p.as_os_str().len() > MAX_PATH) {
            // Below a folder left out as too deep: not watched, so not seen again either.
            self.changes.shed += 1;
            return;
        }
        let Some(r) = rel(&path) else { return };
        match event.kind {
            Kind::Create(kind) => {
                self.changes.offer(r, Change::Created, None, now);
                if matches!(kind, notify::event::CreateKind::Folder) {
                    self.watch_tree(&path, true);
                }
            }
            Kind::Modify(ModifyKind::Name(RenameMode::Both)) => {
                let Some(to) = paths.get(1) else {
                    return;
                };
                let Some(to_rel) = rel(to) else {
                    return;
                };
                self.changes.renamed(&r, to_rel, now);
                // A folder moved: what was watched under its old name is under the new one
                // now (watched again below), so the old names give their room back.
                self.forget_below(&path);
                if self.is_real_dir(to) {
                    self.watch_tree(&to.clone(), false);
                }
            }
            // A rename's two halves: `Both` above records a pair; a half without its other
            // is a move out of (`From`) or into (`To`) the watched folders.
            Kind::Modify(ModifyKind::Name(RenameMode::From)) => {
                self.changes.moved_out(r, now);
                self.forget_below(&path);
            }
            Kind::Modify(ModifyKind::Name(RenameMode::To)) => {
                self.changes.moved_in(r, now);
                if self.is_real_dir(&path) {
                    self.watch_tree(&path, true);
                }
            }
            Kind::Modify(ModifyKind::Data(_) | ModifyKind::Metadata(_) | ModifyKind::Any) => {
                self.changes.offer(r, Change::Modified, None, now);
            }
            // Closed after being opened for writing: written, perhaps through `mmap`, which
            // raises no `IN_MODIFY` (`Changes::settled` compares).
            Kind::Access(AccessKind::Close(AccessMode::Write)) => {
                self.changes.offer(r, Change::Written, None, now);
            }
            Kind::Remove(_) => {
                self.changes.offer(r, Change::Deleted, None, now);
                self.forget_below(&path);
            }
            _ => {}
        }
    }

    /// A folder, not a symbolic link to one: a link the agent planted could point anywhere in
    /// the guard's own file system.
    fn is_real_dir(&self, path: &Path) -> bool {
        self.fs
            .short(path)
            .and_then(|p| std::fs::symlink_metadata(p).ok())
            .is_some_and(|m| m.is_dir())
    }

    /// The watched folders that are no folder any more, forgotten: their removal's events were
    /// lost (the kernel dropped their watches with them). After a walk that follows a loss.
    fn forget_gone(&mut self) {
        let gone: Vec<PathBuf> = self
            .watched
            .iter()
            .filter(|dir| !self.is_real_dir(dir))
            .cloned()
            .collect();
        for dir in gone {
            if self.watched.remove(&dir) {
                self.watched_bytes.give(dir.as_os_str().len());
                self.watches = self.watches.saturating_sub(1);
            }
        }
    }

    /// `dir` and what is below it are gone or moved away: notify dropped their watches.
    fn forget_below(&mut self, dir: &Path) {
        let gone: Vec<PathBuf> = self
            .watched
            .range(dir.to_path_buf()..)
            .take_while(|p| p.starts_with(dir))
            .cloned()
            .collect();
        for path in gone {
            self.watched_bytes.give(path.as_os_str().len());
            self.watched.remove(&path);
        }
        self.fs.forget_below(dir);
    }

    /// Watch `dir` and every folder below it; with `new`, what is already in a folder that was
    /// not watched was written before its watch existed, so it is recorded as created.
    fn watch_tree(&mut self, dir: &Path, new: bool) {
        // The folders yet to be read, within `WALK_BYTES`: one folder can hold a hundred
        // thousand with long names. One that does not fit is left out as at the watch cap,
        // and the workspace walked again later (`rewatch`).
        let mut to_read = Budget::new(WALK_BYTES);
        to_read.take(dir.as_os_str().len());
        let mut stack = vec![dir.to_path_buf()];
        while let Some(dir) = stack.pop() {
            to_read.give(dir.as_os_str().len());
            let rel = relative(&self.fs.root, &dir).unwrap_or_default();
            if SKIPPED.iter().any(|s| rel == *s) {
                continue;
            }
            if dir.as_os_str().len() > MAX_PATH {
                self.too_deep += 1;
                self.note_left_out(&rel);
                continue;
            }
            let at = match self.fs.reach(&dir) {
                Ok(at) => at,
                Err(Unreachable::TooDeep) => {
                    self.too_deep += 1;
                    self.note_left_out(&rel);
                    continue;
                }
                Err(Unreachable::Gone) => continue,
            };
            if !std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            let known = self.watched.contains(&dir);
            if known && self.rewalking {
                // The same folder: the kernel keeps its one watch. A new one in its place:
                // watched now.
                let _ = self.watcher.watch(&at, RecursiveMode::NonRecursive);
            }
            if !known {
                if !self.room_for_a_watch(dir.as_os_str().len()) {
                    // Nor are the folders below it walked: the agent may have made them by the
                    // hundred thousand. `over_limit` (or `over_memory`, past `WATCHED_BYTES`)
                    // counts at least this one; it is watched (and walked) once there is room
                    // (`rewatch`), so that filling the cap, making a folder and removing the
                    // filler does not leave that folder unwatched.
                    if self.watched_bytes.fits(dir.as_os_str().len()) {
                        self.over_limit += 1;
                    } else {
                        self.over_memory += 1;
                    }
                    self.note_left_out(&rel);
                    if self.skipped.len() < MAX_SKIPPED
                        && self.skipped_bytes.take(dir.as_os_str().len())
                    {
                        self.skipped.push_back(dir);
                    } else {
                        self.lost = true;
                    }
                    continue;
                }
                match self.watcher.watch(&at, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        self.watches += 1;
                        self.watched_bytes.take(dir.as_os_str().len());
                        self.watched.insert(dir.clone());
                    }
                    Err(e) => match &e.kind {
                        notify::ErrorKind::MaxFilesWatch => {
                            self.over_limit += 1;
                            self.note_left_out(&rel);
                        }
                        notify::ErrorKind::Io(io)
                            if io.kind() == std::io::ErrorKind::PermissionDenied =>
                        {
                            self.unreadable += 1;
                            self.note_left_out(&rel);
                        }
                        _ => {} // gone already: nothing to watch
                    },
                }
            }
            let Ok(entries) = std::fs::read_dir(&at) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = dir.join(entry.file_name());
                if !known {
                    if let Some(r) = relative(&self.fs.root, &path) {
                        if new {
                            self.changes
                                .offer(r.clone(), Change::Created, None, Utc::now());
                        }
                        if !kind.is_dir() {
                            self.changes.note(&r, &at.join(entry.file_name()), &self.fs);
                        }
                    }
                }
                // Symbolic links are not followed: their targets are not the workspace's.
                if kind.is_dir() {
                    if to_read.take(path.as_os_str().len()) {
                        stack.push(path);
                    } else {
                        self.over_memory += 1;
                        let rel = relative(&self.fs.root, &path).unwrap_or_default();
                        self.note_left_out(&rel);
                        self.lost = true;
                    }
                }
            }
        }
    }

    fn note_left_out(&mut self, rel: &str) {
        // At most `MAX_PATH` and a name long: the walk reaches no folder deeper.
        let rel = if rel.is_empty() { "." } else { rel };
        if self.left_out.len() < NAMED && !self.left_out.iter().any(|l| l == rel) {
            self.left_out.push(rel.to_string());
        }
    }

    /// Watch the folders left out at the cap, oldest first, while there is room: what is in one
    /// now was written while it had no watch, so it is recorded as created. When more were
    /// left out than remembered, the whole workspace is walked for them.
    fn rewatch(&mut self) {
        // Room for the folder in front, not just any: one that does not fit would go back to
        // the end of the queue, round and round.
        while let Some(len) = self.skipped.front().map(|d| d.as_os_str().len()) {
            if !self.room_for_a_watch(len) {
                break;
            }
            let Some(dir) = self.skipped.pop_front() else {
                break;
            };
            self.skipped_bytes.give(len);
            self.watch_tree(&dir, true);
        }
        if self.lost
            && self.skipped.is_empty()
            && Instant::now() >= self.next_rewalk
            && self.room_for_a_watch(0)
        {
            self.lost = false;
            let started = Instant::now();
            let root = self.fs.root.clone();
            self.rewalking = true;
            self.watch_tree(&root, true);
            self.rewalking = false;
            self.forget_gone();
            self.next_rewalk = Instant::now() + MIN_REWALK.max(started.elapsed() * 10);
        }
    }

    /// Whether another watch, of a folder whose path is `len` bytes long, stays within the cap
    /// and `WATCHED_BYTES`. At the cap the watches are counted again from the kernel (at most
    /// once a `RECOUNT`): folders removed since gave theirs back.
    fn room_for_a_watch(&mut self, len: usize) -> bool {
        if !self.watched_bytes.fits(len) {
            return false;
        }
        if self.watches < self.cap {
            return true;
        }
        if self.counted.elapsed() >= RECOUNT {
            self.counted = Instant::now();
            if let Some(n) = inotify_watches() {
                self.watches = n;
            }
        }
        self.watches < self.cap
    }

    /// A `file_watch_overflow` record (at most one a flush) when the queue overflowed again.
    fn report_overflows(&mut self) {
        // A run of dropped events is one overflow, as one of the kernel's queue is; so is a
        // run of changes the full tables could not keep (`Changes::shed`).
        let shed = self.changes.shed;
        if self.dropped.swap(0, Ordering::Relaxed) > 0 || shed > self.reported_shed {
            self.overflows += 1;
            // A folder made meanwhile may have lost its one event: walked again (`rewatch`).
            self.lost = true;
        }
        self.reported_shed = shed;
        if self.overflows == self.reported_overflows {
            return;
        }
        self.reported_overflows = self.overflows;
        self.write(guard_event(
            "file_watch_overflow",
            [
                ("count", self.overflows.into()),
                ("unrecorded", shed.into()),
            ],
        ));
    }

    /// A `file_watch_incomplete` record when more folders went unwatched, or more sensitive
    /// files or links untracked, since the last one.
    fn report_unwatched(&mut self) {
        let unwatched = self.over_limit + self.over_memory + self.unreadable + self.too_deep;
        let untracked = self.changes.known.untracked;
        if (unwatched, untracked) == self.reported_unwatched {
            return;
        }
        self.reported_unwatched = (unwatched, untracked);
        let limit = watch_limit();
        self.write(guard_event(
            "file_watch_incomplete",
            [
                ("unwatched_folders", unwatched.into()),
                ("over_limit", self.over_limit.into()),
                ("over_memory", self.over_memory.into()),
                ("unreadable", self.unreadable.into()),
                ("too_deep", self.too_deep.into()),
                ("left_out", self.left_out.clone().into()),
                ("untracked", untracked.into()),
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
    /// Closed after being opened for writing, with no other change seen: a change only if
    /// the file differs from what was known of it.
    Written,
}

impl Change {
    fn name(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Modified | Change::Written => "modified",
            Change::Deleted => "deleted",
            Change::Renamed => "renamed",
        }
    }

    /// What `self` followed by `next` within the debounce amounts to.
    fn then(self, next: Change) -> Change {
        use Change::*;
        match (self, next) {
            (this, Written) => this,
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
    /// Held in `Changes::sensitive_bytes`, not `pending_bytes`.
    sensitive: bool,
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

/// What a sensitive file held when last seen: a write through `mmap` changes none of its
/// size, times or inode on some file systems (tmpfs), so a small file's content is hashed too.
#[derive(Debug, Clone, PartialEq)]
struct Print {
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    hash: Option<u64>,
}

/// A sensitive file, by inode: what it held, and the sensitive paths it is.
struct KnownFile {
    print: Print,
    paths: BTreeSet<String>,
}

/// Sensitive files by inode (a hard link to one is the same file), and the links in the
/// workspace where sensitive paths are (`.git/hooks -> ../tools/hooks`), by what they lead to.
struct Known {
    files: HashMap<(u64, u64), KnownFile>,
    paths: HashMap<String, (u64, u64)>,
    /// Link (relative) -> what it leads to (relative, `""` for the root), and back.
    links: HashMap<String, String>,
    targets: HashMap<String, BTreeSet<String>>,
    /// Sensitive files and links not tracked past `MAX_KNOWN`, `MAX_LINKS` or `KNOWN_BYTES`.
    untracked: u64,
    /// The bytes of the names held (each twice: by name, and by file or target).
    bytes: Budget,
    /// Bytes walks may still read to hash sensitive files (`FIRST_HASH_BUDGET`).
    walk_budget: u64,
    /// Keys of the content hash, random per guard: the agent cannot aim at a collision.
    keys: std::collections::hash_map::RandomState,
}

impl Known {
    fn new() -> Known {
        Known {
            files: HashMap::new(),
            paths: HashMap::new(),
            links: HashMap::new(),
            targets: HashMap::new(),
            untracked: 0,
            bytes: Budget::new(KNOWN_BYTES),
            walk_budget: FIRST_HASH_BUDGET,
            keys: std::collections::hash_map::RandomState::new(),
        }
    }

    /// What the regular file `meta` describes holds now, read through `at`; with `hash`, its
    /// content is hashed when it is no larger than `MAX_HASHED`.
    fn print(&self, meta: &Metadata, at: &Path, hash: bool) -> Print {
        Print {
            size: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            hash: (hash && meta.len() <= MAX_HASHED)
                .then(|| self.hash(meta, at))
                .flatten(),
        }
    }

    /// The content of the regular file `at` (the inode of `meta`), hashed. Opened without
    /// waiting and without following a link, so that a FIFO or a link swapped in cannot stall
    /// the watcher or point it elsewhere.
    fn hash(&self, meta: &Metadata, at: &Path) -> Option<u64> {
        use std::io::Read;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(at)
            .ok()?;
        let now = file.metadata().ok()?;
        if !now.is_file() || now.ino() != meta.ino() || now.dev() != meta.dev() {
            return None;
        }
        let mut bytes = Vec::new();
        file.take(MAX_HASHED + 1).read_to_end(&mut bytes).ok()?;
        let mut hasher = self.keys.build_hasher();
        hasher.write(&bytes);
        Some(hasher.finish())
    }

    /// The file `meta` (read through `at`) is the sensitive paths `names` now.
    fn remember(&mut self, names: &[String], meta: &Metadata, at: &Path, hash: bool) {
        let key = (meta.dev(), meta.ino());
        if !self.files.contains_key(&key) && self.files.len() >= MAX_KNOWN {
            self.untracked += 1;
            return;
        }
        let print = self.print(meta, at, hash);
        let mut kept = Vec::with_capacity(names.len());
        for name in names {
            if self.paths.get(name).is_some_and(|k| *k != key) {
                self.forget(name);
            }
            if !self.paths.contains_key(name) {
                if !self.bytes.take(2 * name.len()) {
                    self.untracked += 1;
                    continue;
                }
                self.paths.insert(name.clone(), key);
            }
            kept.push(name.clone());
        }
        if kept.is_empty() {
            return;
        }
        let file = self.files.entry(key).or_insert_with(|| KnownFile {
            print: print.clone(),
            paths: BTreeSet::new(),
        });
        file.print = print;
        file.paths.extend(kept);
    }

    /// `name` is no longer the file it was.
    fn forget(&mut self, name: &str) {
        let Some(key) = self.paths.remove(name) else {
            return;
        };
        self.bytes.give(2 * name.len());
        if let Some(file) = self.files.get_mut(&key) {
            file.paths.remove(name);
            if file.paths.is_empty() {
                self.files.remove(&key);
            }
        }
    }

    /// Whether the file `meta` (read through `at`) differs from what was known of it; a file
    /// not known does.
    fn differs(&self, meta: &Metadata, at: &Path) -> bool {
        match self.files.get(&(meta.dev(), meta.ino())) {
            Some(known) => self.print(meta, at, known.print.hash.is_some()) != known.print,
            None => true,
        }
    }

    /// The sensitive paths that are the same file as `rel` (hard links), still so now.
    fn same_file(&self, rel: &str, meta: &Metadata, fs: &Fs) -> Vec<String> {
        if !meta.is_file() || meta.nlink() < 2 {
            return Vec::new();
        }
        let key = (meta.dev(), meta.ino());
        let Some(file) = self.files.get(&key) else {
            return Vec::new();
        };
        file.paths
            .iter()
            .filter(|p| *p != rel)
            .filter(|p| fs.lstat(p).is_some_and(|m| (m.dev(), m.ino()) == key))
            .cloned()
            .collect()
    }

    /// The paths `rel` is reached by through the links tracked: `tools/hooks/pre-commit` is
    /// `.git/hooks/pre-commit` when `.git/hooks` leads to `tools/hooks`.
    fn through_links(&self, rel: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut above = Some(rel);
        while let Some(dir) = above {
            if let Some(links) = self.targets.get(dir) {
                let rest = &rel[dir.len()..];
                for link in links {
                    out.push(match (dir.is_empty(), rest.is_empty()) {
                        (_, true) => link.clone(),
                        (true, false) => format!("{link}/{rest}"),
                        (false, false) => format!("{link}{rest}"),
                    });
                }
            }
            above = match dir.rfind('/') {
                Some(i) => Some(&dir[..i]),
                None if !dir.is_empty() => Some(""),
                None => None,
            };
        }
        out
    }

    /// `rel` is a link (tracked, with what it leads to inside the workspace) or no longer one.
    fn track_link(&mut self, rel: &str, meta: Option<&Metadata>, fs: &Fs) {
        if let Some(target) = self.links.remove(rel) {
            self.bytes.give(2 * (rel.len() + target.len()));
            if let Some(links) = self.targets.get_mut(&target) {
                links.remove(rel);
                if links.is_empty() {
                    self.targets.remove(&target);
                }
            }
        }
        if !meta.is_some_and(|m| m.file_type().is_symlink()) {
            return;
        }
        // Where the link leads, all links on the way resolved; only inside the workspace.
        let Some(target) = fs
            .short(&fs.root.join(rel))
            .and_then(|p| p.canonicalize().ok())
            .and_then(|t| {
                Some(
                    t.strip_prefix(&fs.real_root)
                        .ok()?
                        .to_string_lossy()
                        .into_owned(),
                )
            })
        else {
            return;
        };
        if self.links.len() >= MAX_LINKS || !self.bytes.take(2 * (rel.len() + target.len())) {
            self.untracked += 1;
            return;
        }
        self.targets
            .entry(target.clone())
            .or_default()
            .insert(rel.to_string());
        self.links.insert(rel.to_string(), target);
    }
}

/// Debouncing per path and folding per folder, over relative paths and times; what a path is
/// now (size, inode) is read through `Fs` when its record is made.
struct Changes {
    sensitive: GlobSet,
    /// The folders the sensitive globs reach into: a link there is tracked.
    folders: GlobSet,
    pending: HashMap<String, Pending>,
    pending_bytes: Budget,
    sensitive_bytes: Budget,
    buckets: HashMap<(String, Change), Bucket>,
    bucket_bytes: Budget,
    known: Known,
    /// Changes not recorded: `pending` was full, or the path too long (`MAX_PATH`).
    shed: u64,
}

impl Changes {
    fn new(sensitive: GlobSet, folders: GlobSet) -> Self {
        Changes {
            sensitive,
            folders,
            pending: HashMap::new(),
            pending_bytes: Budget::new(PENDING_BYTES),
            sensitive_bytes: Budget::new(SENSITIVE_PENDING_BYTES),
            buckets: HashMap::new(),
            bucket_bytes: Budget::new(BUCKET_BYTES),
            known: Known::new(),
            shed: 0,
        }
    }

    /// An entry (not a folder) found by a walk, `at` its short path: a sensitive file is
    /// known from now on, and a link where a sensitive path is, tracked.
    fn note(&mut self, rel: &str, at: &Path, fs: &Fs) {
        let sensitive = self.is_sensitive(rel);
        if !sensitive && !self.folders.is_match(rel) {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(at) else {
            return;
        };
        if meta.file_type().is_symlink() {
            self.known.track_link(rel, Some(&meta), fs);
        } else if sensitive && meta.is_file() {
            // Walks share a budget of bytes hashed: the first one may meet many.
            let hash = meta.len() <= MAX_HASHED && meta.len() <= self.known.walk_budget;
            if hash {
                self.known.walk_budget -= meta.len();
            }
            self.known.remember(&[rel.to_string()], &meta, at, hash);
        }
    }

    fn offer(&mut self, path: String, change: Change, from: Option<String>, now: DateTime<Utc>) {
        let from_len = |from: &Option<String>| from.as_ref().map_or(0, String::len);
        match self.pending.get_mut(&path) {
            Some(p) => {
                p.change = p.change.then(change);
                if from.is_some() {
                    let budget = match p.sensitive {
                        true => &mut self.sensitive_bytes,
                        false => &mut self.pending_bytes,
                    };
                    budget.give(from_len(&p.from));
                    if budget.take(from_len(&from)) {
                        p.from = from;
                    } else {
                        budget.take(from_len(&p.from));
                        self.shed += 1;
                    }
                }
                p.last = now;
            }
            None => {
                let sensitive = self.is_sensitive(&path)
                    || from.as_deref().is_some_and(|f| self.is_sensitive(f));
                let budget = match sensitive {
                    true => &mut self.sensitive_bytes,
                    false => &mut self.pending_bytes,
                };
                // Full: not recorded, but counted (`file_watch_overflow`).
                if !budget.take(path.len() + from_len(&from)) {
                    self.shed += 1;
                    return;
                }
                self.pending.insert(
                    path,
                    Pending {
                        change,
                        from,
                        first: now,
                        last: now,
                        sensitive,
                    },
                );
            }
        }
    }

    /// `path`'s pending change taken out, its bytes given back.
    fn take_pending(&mut self, path: &str) -> Option<Pending> {
        let p = self.pending.remove(path)?;
        let budget = match p.sensitive {
            true => &mut self.sensitive_bytes,
            false => &mut self.pending_bytes,
        };
        budget.give(path.len() + p.from.as_ref().map_or(0, String::len));
        Some(p)
    }

    fn renamed(&mut self, from: &str, to: String, now: DateTime<Utc>) {
        // A path created and renamed within the debounce appears under its new name.
        let was = self.take_pending(from);
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
    fn settled(&mut self, now: DateTime<Utc>, all: bool, fs: &Fs) -> Vec<EventKind> {
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
            let Some(mut p) = self.take_pending(&path) else {
                continue;
            };
            let at = fs.short(&fs.root.join(&path));
            let meta = match p.change {
                Change::Deleted => None,
                _ => at
                    .as_ref()
                    .and_then(|at| std::fs::symlink_metadata(at).ok()),
            };
            let size = meta.as_ref().filter(|m| m.is_file()).map(|m| m.len());
            // Sensitive by its own path (or the one it was renamed from), or as the same
            // file as a sensitive path: a hard link, or a path below a link.
            let own = self.is_sensitive(&path);
            let mut links = meta
                .as_ref()
                .map(|m| self.known.same_file(&path, m, fs))
                .unwrap_or_default();
            links.extend(
                self.known
                    .through_links(&path)
                    .into_iter()
                    .filter(|l| self.is_sensitive(l)),
            );
            links.sort();
            links.dedup();
            links.retain(|l| *l != path);
            let sensitive =
                own || !links.is_empty() || p.from.as_deref().is_some_and(|f| self.is_sensitive(f));
            if p.change == Change::Written {
                // Only a sensitive file is compared; an unchanged one is no record.
                let changed = sensitive
                    && match (&meta, &at) {
                        (Some(m), Some(at)) if m.is_file() => self.known.differs(m, at),
                        _ => false,
                    };
                if !changed {
                    continue;
                }
                p.change = Change::Modified;
            }
            self.keep_known(&path, &p, meta.as_ref(), at.as_deref(), own, &links, fs);
            if sensitive {
                out.push(record(path, p.change, p.from, size, true, links));
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
                Some(b) => {
                    // Quiet long enough: written as it is, and folding starts again.
                    b.count = 0;
                    b.size = 0;
                    b.first = now;
                    b.last = now;
                    b.seen = now;
                    out.push(record(path, p.change, p.from, size, false, vec![]));
                }
                None => {
                    // With no room for another folder, its changes are written one by one.
                    if self.bucket_bytes.take(folder.len()) {
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
                    }
                    out.push(record(path, p.change, p.from, size, false, vec![]));
                }
            }
        }
        out
    }

    /// What is known of sensitive files and links, after the change `p` of `path` (`meta`:
    /// what it is now, read through `at`; `links`: the sensitive paths it is too).
    #[allow(clippy::too_many_arguments)]
    fn keep_known(
        &mut self,
        path: &str,
        p: &Pending,
        meta: Option<&Metadata>,
        at: Option<&Path>,
        own: bool,
        links: &[String],
        fs: &Fs,
    ) {
        if let Some(from) = &p.from {
            self.known.forget(from);
            self.known.track_link(from, None, fs);
        }
        if own || self.folders.is_match(path) {
            self.known.track_link(path, meta, fs);
        }
        match (meta, at) {
            (Some(m), Some(at)) if m.is_file() && (own || !links.is_empty()) => {
                let mut names = links.to_vec();
                if own {
                    names.push(path.to_string());
                }
                self.known.remember(&names, m, at, true);
            }
            _ => self.known.forget(path),
        }
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
                links: vec![],
                count: Some(b.count),
                first: Some(b.first),
                last: Some(b.last),
            });
            b.count = 0;
            b.size = 0;
        }
        let bytes = &mut self.bucket_bytes;
        self.buckets.retain(|(folder, _), b| {
            let keep = b.count > 0 || now - b.seen < fold_window;
            if !keep {
                bytes.give(folder.len());
            }
            keep
        });
        out
    }
}

fn record(
    path: String,
    change: Change,
    from: Option<String>,
    size: Option<u64>,
    sensitive: bool,
    links: Vec<String>,
) -> EventKind {
    EventKind::File {
        path,
        change: change.name().into(),
        from,
        size,
        sensitive,
        links,
        count: None,
        first: None,
        last: None,
    }
}

#[cfg(test)]
#[path = "watcher_tests.rs"]
mod tests;
