//! What ran, by content: the SHA-256 of the binary a program was exec'd from.
//!
//! A path says little: a launcher can rename a payload over `/usr/bin/true`, exec it and put
//! the original back, or exec a memfd. At the exec stop the supervisor opens
//! `/proc/<pid>/exe`, which is the kernel's own handle on the mapped file, whatever its path
//! says now, and looks the file up by identity (device, inode, size, mtime, ctime):
//! - known: the hash goes into the `exec` record itself (an `fstat` and a map lookup, the
//!   common case: agents run the same few programs again and again);
//! - not known: the open file goes to a hasher thread and the exec goes on; the hash follows as
//!   an `exec_digest` record with the exec's id. Hashing a large binary at the exec stop would
//!   stall every other exec of the agent behind it.
//!
//! Why the identity can be trusted: `ctime` is set by the kernel on every change of a file
//! (content, or a `utimensat` that resets mtime) and cannot be set from user space. Its clock
//! is coarse (a tick of a few ms), so a file changed in the tick it was hashed in could keep
//! its identity with other content: like git's "racy" entries, a hash is cached only when the
//! file's ctime is older than [`SETTLED`] at the time it was read. A file whose ctime moved while
//! it was hashed is reported `changed`.
//!
//! The first hash of a file has the same race, closed by two facts, either of which must hold
//! or the record says `changed` (the hash is not surely of what ran):
//! - **its ctime was older than the coarse clock when the identity was read** at the exec stop
//!   (the clock is read first): every write after that read sets a later ctime (the coarse
//!   clock has moved past it; kernels with fine-grained timestamps, 6.13+, give a changed
//!   file whose ctime was just read a finer one), so the identity taken after the hash sees it;
//! - or **the program still runs that file when the hash ends**: a file being executed cannot
//!   be opened for writing (`ETXTBSY`), and an exec of a file someone holds open for writing
//!   fails (`ETXTBSY`), so from the exec to the end of the hash nobody wrote it.
//!
//! The kernel's change counter (`i_version`) is not reachable from user space (statx has no
//! such field), so it cannot replace these. What is left: a program that ends, is exec'd
//! again and whose file is rewritten in between, all while the hash runs and within the one
//! clock tick of its last change; and Linux 6.11 alone, which let running binaries be written.
//!
//! Binaries up to [`LARGE`] are hashed on one thread, larger ones on a second, so a huge file
//! never holds up the hash of the next small one; reads are streamed ([`hash_file`]), memory is
//! one buffer. Past [`MAX_HASHED`] the record says `too large` (unhashed).
//!
//! Hand-written: a cache keyed by `fstat` fields and two threads; `sha2` does the hashing.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A file changed less than this long ago is hashed again at its next exec.
const SETTLED: Duration = Duration::from_secs(2);
/// Identities remembered; the map starts over when full (a cost, never a wrong answer).
const MAX_CACHED: usize = 16_384;
/// Jobs waiting for the hasher; past this the exec's digest is reported as skipped.
const MAX_QUEUED: usize = 1024;
/// Binaries larger than this are hashed on a thread of their own (a 1 GiB file keeps a hasher
/// busy for seconds), with a short queue of [`MAX_QUEUED_LARGE`].
pub const LARGE: u64 = 64 << 20;
const MAX_QUEUED_LARGE: usize = 16;
/// Larger binaries are not hashed (minutes of reading); the `exec_digest` record says
/// `too large`. Far past any real program: only a file made to be skipped is this large.
pub const MAX_HASHED: u64 = 64 << 30;

/// What identifies a file's content without reading it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Identity {
    pub fn of(file: &File) -> std::io::Result<Identity> {
        // SAFETY: fstat writes a plain struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid descriptor and a struct of the right size.
        if unsafe { libc::fstat(file.as_raw_fd(), &mut st) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Identity {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size as u64,
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
        })
    }

    /// Whether the last change is far enough in the past for the identity to stand for the
    /// content (see the module doc).
    fn settled(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let changed = Duration::new(self.ctime.0.max(0) as u64, self.ctime.1.max(0) as u32);
        now.saturating_sub(changed) >= SETTLED
    }

    /// Whether the last change's clock tick was over when `clock` (the coarse clock, read
    /// before the identity) was read: then any later write moves ctime. A ctime of whole
    /// seconds may come from a file system that keeps no finer times: compared in seconds.
    fn older_than(&self, clock: (i64, i64)) -> bool {
        if self.ctime.1 == 0 {
            self.ctime.0 < clock.0
        } else {
            self.ctime < clock
        }
    }
}

/// The coarse real-time clock, the one file times are taken from.
fn coarse_now() -> (i64, i64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    (ts.tv_sec, ts.tv_nsec)
}

/// How a digest ended, for the `exec_digest` record.
pub struct Finished {
    pub id: u64,
    pub pid: i32,
    pub sha256: Option<String>,
    pub changed: bool,
    pub error: Option<String>,
    /// A preloaded library's path ([`Digests::lookup_file`]); `None` for the binary.
    pub library: Option<String>,
}

struct Job {
    id: u64,
    pid: i32,
    file: File,
    identity: Identity,
    /// The coarse clock right before `identity` was read.
    clock: (i64, i64),
    /// The program's pidfd: whether it still runs the file when the hash ends.
    pidfd: Option<OwnedFd>,
    library: Option<String>,
}

/// The cache and the hasher threads.
pub struct Digests {
    cache: Arc<Mutex<HashMap<Identity, String>>>,
    jobs: mpsc::SyncSender<Job>,
    large_jobs: mpsc::SyncSender<Job>,
}

/// What the supervisor learns at the exec stop.
pub enum Lookup {
    /// The hash, for the `exec` record.
    Known(String),
    /// Sent to the hasher: an `exec_digest` record follows.
    Queued,
    /// Neither (the binary could not be opened, or the hasher is full): said in an
    /// `exec_digest` record right away.
    Failed(String),
}

impl Digests {
    /// Start the hashers; `done` is called on their threads for every job they finish.
    pub fn start(done: impl Fn(Finished) + Send + Sync + 'static) -> std::io::Result<Digests> {
        let cache = Arc::new(Mutex::new(HashMap::new()));
        let done = Arc::new(done);
        let hasher = |name: &str, size: usize| {
            let (jobs, queue) = mpsc::sync_channel::<Job>(size);
            let (cache, done) = (Arc::clone(&cache), Arc::clone(&done));
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    for job in queue {
                        done(hash_job(job, &cache, MAX_HASHED));
                    }
                })
                .map(|_| jobs)
        };
        let jobs = hasher("yolo-exec-digest", MAX_QUEUED)?;
        let large_jobs = hasher("yolo-exec-digest-large", MAX_QUEUED_LARGE)?;
        Ok(Digests {
            cache,
            jobs,
            large_jobs,
        })
    }

    /// Look up the binary of `pid`, stopped at its exec; queue it for hashing when unknown.
    pub fn lookup(&self, id: u64, pid: i32) -> Lookup {
        let file = match File::open(format!("/proc/{pid}/exe")) {
            Ok(f) => f,
            Err(e) => return Lookup::Failed(format!("open: {e}")),
        };
        self.lookup_open(id, pid, file, None)
    }

    /// The same for a library preloaded into `pid`, opened by the caller: by the same cache,
    /// its hash follows as an `exec_digest` record naming `library`.
    pub fn lookup_file(&self, id: u64, pid: i32, file: File, library: &str) -> Lookup {
        self.lookup_open(id, pid, file, Some(library.to_string()))
    }

    fn lookup_open(&self, id: u64, pid: i32, file: File, library: Option<String>) -> Lookup {
        let clock = coarse_now();
        let identity = match Identity::of(&file) {
            Ok(i) => i,
            Err(e) => return Lookup::Failed(format!("stat: {e}")),
        };
        if let Some(known) = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&identity)
        {
            return Lookup::Known(known.clone());
        }
        let lane = if identity.size > LARGE {
            &self.large_jobs
        } else {
            &self.jobs
        };
        // Only for a binary not seen before (a pidfd_open), and only when its last change is
        // recent does the hasher use it. A library has no such guard: a mapped library can be
        // written (no ETXTBSY), so only its ctime vouches for it.
        let pidfd = (library.is_none() && !identity.older_than(clock))
            .then(|| pidfd_open(pid))
            .flatten();
        match lane.try_send(Job {
            id,
            pid,
            file,
            identity,
            clock,
            pidfd,
            library,
        }) {
            Ok(()) => Lookup::Queued,
            Err(_) => Lookup::Failed("the hasher is behind (too many new binaries at once)".into()),
        }
    }
}

fn hash_job(job: Job, cache: &Mutex<HashMap<Identity, String>>, limit: u64) -> Finished {
    let mut finished = Finished {
        id: job.id,
        pid: job.pid,
        sha256: None,
        changed: false,
        error: None,
        library: job.library,
    };
    if job.identity.size > limit {
        finished.error = Some(format!(
            "too large (unhashed): {} bytes, more than the {limit} the hasher reads",
            job.identity.size
        ));
        return finished;
    }
    // At most the size seen at the stop: a file that grew since (a library rewritten, a
    // binary truncated up to a huge sparse size once its program ended) is `changed`, and
    // cannot hold a hasher for longer than what was exec'd takes to read.
    match hash_file(&job.file, job.identity.size) {
        Ok(hex) => {
            let after = Identity::of(&job.file).ok();
            // Unchanged, and a write could not have gone unseen (see the module doc).
            let unseen_write_impossible = job.identity.older_than(job.clock)
                || job
                    .pidfd
                    .as_ref()
                    .is_some_and(|fd| still_runs(fd, job.pid, &job.identity));
            finished.changed = after != Some(job.identity) || !unseen_write_impossible;
            if !finished.changed && job.identity.settled() {
                let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
                if cache.len() >= MAX_CACHED {
                    cache.clear();
                }
                cache.insert(job.identity, hex.clone());
            }
            finished.sha256 = Some(hex);
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => finished.changed = true,
        Err(e) => finished.error = Some(format!("read: {e}")),
    }
    finished
}

/// Whether the process of `pidfd` (`pid`) still runs the file of `identity`: alive before and
/// after its `/proc/<pid>/exe` is looked at, so the pid is still its own.
fn still_runs(pidfd: &OwnedFd, pid: i32, identity: &Identity) -> bool {
    let alive = || {
        let mut poll = libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, no wait. Readable means it exited.
        unsafe { libc::poll(&mut poll, 1, 0) == 0 }
    };
    let runs = || {
        File::open(format!("/proc/{pid}/exe"))
            .and_then(|f| Identity::of(&f))
            .is_ok_and(|now| now == *identity)
    };
    alive() && runs() && alive()
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: plain syscall.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: just opened, ours.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The hex SHA-256 of a file from its start, streamed through one buffer; past `limit` bytes
/// an error of kind `InvalidData`.
pub fn hash_file(file: &File, limit: u64) -> std::io::Result<String> {
    use std::os::unix::fs::FileExt;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut at = 0u64;
    loop {
        // Positioned reads: the handle's offset is shared with nothing, but pread needs none.
        let n = file.read_at(&mut buf, at)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        at += n as u64;
        if at > limit {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "larger than the hasher reads",
            ));
        }
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A whole small file's hash, for tests and for callers that hold no handle.
#[cfg(test)]
fn hash_path(path: &std::path::Path) -> String {
    use std::io::Read;
    let mut data = Vec::new();
    File::open(path).unwrap().read_to_end(&mut data).unwrap();
    hex(&Sha256::digest(&data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_is_hashed_by_its_content_and_known_hashes_need_a_settled_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bin");
        std::fs::write(&path, b"hello").unwrap();
        let file = File::open(&path).unwrap();
        assert_eq!(
            hash_file(&file, MAX_HASHED).unwrap(),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(hash_file(&file, MAX_HASHED).unwrap(), hash_path(&path));
        // Just written: not settled, so it would not be cached.
        assert!(!Identity::of(&file).unwrap().settled());
        // A change in place changes the identity (ctime, size or mtime), whatever mtime says.
        let before = Identity::of(&file).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let mut w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        w.write_all(b"j").unwrap();
        drop(w);
        assert_ne!(Identity::of(&file).unwrap(), before);
    }

    fn job(file: File, pid: i32, clock: (i64, i64), pidfd: Option<OwnedFd>) -> Job {
        let identity = Identity::of(&file).unwrap();
        Job {
            id: 1,
            pid,
            file,
            identity,
            clock,
            pidfd,
            library: None,
        }
    }

    #[test]
    fn a_job_whose_file_changed_while_hashed_says_so_and_is_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bin");
        std::fs::write(&path, b"one").unwrap();
        let file = File::open(&path).unwrap();
        let job = job(file, 2, coarse_now(), None);
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&path, b"two").unwrap();
        let cache = Mutex::new(HashMap::new());
        let done = hash_job(job, &cache, MAX_HASHED);
        assert!(done.changed);
        assert!(cache.lock().unwrap().is_empty());
    }

    /// A file that grew after the stop (truncated up to a huge sparse size once its program
    /// ended, to hold the hasher) is read no further than its size at the stop: `changed`,
    /// with no hash of what it became.
    #[test]
    fn a_file_grown_after_the_stop_is_read_no_further_than_its_size_then() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lib.so");
        std::fs::write(&path, b"small").unwrap();
        let file = File::open(&path).unwrap();
        let job = job(file, 2, coarse_now(), None);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(256 << 20)
            .unwrap();
        let done = hash_job(job, &Mutex::new(HashMap::new()), MAX_HASHED);
        assert!(done.changed);
        assert_eq!(done.sha256, None, "what the file became was hashed");
    }

    /// Issue 23.4: the first hash of a file changed in the clock tick of its exec. An
    /// unchanged identity proves nothing then (a rewrite in the same tick keeps ctime), so the
    /// hash counts only while the program still runs the file (nobody can write a running
    /// binary: the test checks that premise); else it says `changed`. A file whose last
    /// change was before the tick is trusted without it.
    #[test]
    fn a_first_hash_of_a_file_changed_in_its_exec_tick_needs_the_program_still_running_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sleeper");
        std::fs::copy("/bin/sleep", &path).unwrap();
        let mut child = std::process::Command::new(&path).arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        // Wait for the exec to be done: the child's exe is the copy.
        let copy = Identity::of(&File::open(&path).unwrap()).unwrap();
        while File::open(format!("/proc/{pid}/exe"))
            .and_then(|f| Identity::of(&f))
            .map_or(true, |i| i != copy)
        {
            std::thread::yield_now();
        }
        let err = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ETXTBSY), "{err}");
        let exe = || File::open(format!("/proc/{pid}/exe")).unwrap();
        let changed_in_tick = |file: &File| {
            // The clock as it was when the file last changed: its tick not yet over.
            Identity::of(file).unwrap().ctime
        };
        let cache = Mutex::new(HashMap::new());
        // Changed in the tick, still running: trusted.
        let file = exe();
        let clock = changed_in_tick(&file);
        let done = hash_job(job(file, pid, clock, pidfd_open(pid)), &cache, MAX_HASHED);
        assert!(!done.changed);
        assert_eq!(done.sha256.as_deref(), Some(hash_path(&path).as_str()));
        // Changed in the tick, and the program is gone: not vouched for.
        let file = exe();
        let clock = changed_in_tick(&file);
        let pidfd = pidfd_open(pid);
        child.kill().unwrap();
        child.wait().unwrap();
        let done = hash_job(job(file, pid, clock, pidfd), &cache, MAX_HASHED);
        assert!(done.changed, "a gone program cannot vouch for its file");
        assert!(done.sha256.is_some());
        // Its last change before the tick: trusted, program or not.
        let file = File::open(&path).unwrap();
        let (secs, nanos) = Identity::of(&file).unwrap().ctime;
        let done = hash_job(job(file, pid, (secs + 1, nanos), None), &cache, MAX_HASHED);
        assert!(!done.changed);
    }

    /// Issue 23.4: a binary past the old 512 MiB bound is hashed (streamed, one buffer);
    /// past the hasher's bound the record says it is too large, not a read error.
    #[test]
    fn a_large_binary_is_hashed_and_one_past_the_bound_is_said_too_large() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let file = File::create(&path).unwrap();
        file.set_len((512 << 20) + 4096).unwrap();
        drop(file);
        let cache = Mutex::new(HashMap::new());
        let done = hash_job(
            job(File::open(&path).unwrap(), 2, coarse_now(), None),
            &cache,
            MAX_HASHED,
        );
        assert_eq!(done.error, None);
        // Checked against another implementation, without reading it into memory here.
        let sum = std::process::Command::new("sha256sum")
            .arg(&path)
            .output()
            .unwrap();
        let sum = String::from_utf8(sum.stdout).unwrap();
        assert_eq!(done.sha256.as_deref(), sum.split_whitespace().next());
        let done = hash_job(
            job(File::open(&path).unwrap(), 2, coarse_now(), None),
            &cache,
            512 << 20,
        );
        assert_eq!(done.sha256, None);
        assert!(
            done.error
                .as_deref()
                .is_some_and(|e| e.starts_with("too large")),
            "{:?}",
            done.error
        );
    }
}
