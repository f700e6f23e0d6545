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
//! Hand-written: a cache keyed by `fstat` fields and one thread; `sha2` does the hashing.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A file changed less than this long ago is hashed again at its next exec.
const SETTLED: Duration = Duration::from_secs(2);
/// Identities remembered; the map starts over when full (a cost, never a wrong answer).
const MAX_CACHED: usize = 16_384;
/// Jobs waiting for the hasher; past this the exec's digest is reported as skipped.
const MAX_QUEUED: usize = 1024;
/// Larger binaries are not hashed (a 1 GiB file would keep the hasher busy for seconds); the
/// `exec_digest` record says so.
pub const MAX_HASHED: u64 = 512 << 20;

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
}

/// How a digest ended, for the `exec_digest` record.
pub struct Finished {
    pub id: u64,
    pub pid: i32,
    pub sha256: Option<String>,
    pub changed: bool,
    pub error: Option<String>,
}

struct Job {
    id: u64,
    pid: i32,
    file: File,
    identity: Identity,
}

/// The cache and the hasher thread.
pub struct Digests {
    cache: Arc<Mutex<HashMap<Identity, String>>>,
    jobs: mpsc::SyncSender<Job>,
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
    /// Start the hasher; `done` is called on its thread for every job it finishes.
    pub fn start(done: impl Fn(Finished) + Send + 'static) -> std::io::Result<Digests> {
        let cache = Arc::new(Mutex::new(HashMap::new()));
        let (jobs, queue) = mpsc::sync_channel::<Job>(MAX_QUEUED);
        {
            let cache = Arc::clone(&cache);
            std::thread::Builder::new()
                .name("yolo-exec-digest".into())
                .spawn(move || {
                    for job in queue {
                        done(hash_job(job, &cache));
                    }
                })?;
        }
        Ok(Digests { cache, jobs })
    }

    /// Look up the binary of `pid`, stopped at its exec; queue it for hashing when unknown.
    pub fn lookup(&self, id: u64, pid: i32) -> Lookup {
        let file = match File::open(format!("/proc/{pid}/exe")) {
            Ok(f) => f,
            Err(e) => return Lookup::Failed(format!("open: {e}")),
        };
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
        match self.jobs.try_send(Job {
            id,
            pid,
            file,
            identity,
        }) {
            Ok(()) => Lookup::Queued,
            Err(_) => Lookup::Failed("the hasher is behind (too many new binaries at once)".into()),
        }
    }
}

fn hash_job(job: Job, cache: &Mutex<HashMap<Identity, String>>) -> Finished {
    let mut finished = Finished {
        id: job.id,
        pid: job.pid,
        sha256: None,
        changed: false,
        error: None,
    };
    if job.identity.size > MAX_HASHED {
        finished.error = Some(format!(
            "{} bytes, larger than the {} the hasher reads",
            job.identity.size, MAX_HASHED
        ));
        return finished;
    }
    match hash_file(&job.file) {
        Ok(hex) => {
            let after = Identity::of(&job.file).ok();
            finished.changed = after != Some(job.identity);
            if !finished.changed && job.identity.settled() {
                let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
                if cache.len() >= MAX_CACHED {
                    cache.clear();
                }
                cache.insert(job.identity, hex.clone());
            }
            finished.sha256 = Some(hex);
        }
        Err(e) => finished.error = Some(format!("read: {e}")),
    }
    finished
}

/// The hex SHA-256 of a file from its start, bounded by [`MAX_HASHED`].
pub fn hash_file(file: &File) -> std::io::Result<String> {
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
        if at > MAX_HASHED {
            return Err(std::io::Error::other("larger than the hasher reads"));
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
            hash_file(&file).unwrap(),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(hash_file(&file).unwrap(), hash_path(&path));
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

    #[test]
    fn a_job_whose_file_changed_while_hashed_says_so_and_is_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bin");
        std::fs::write(&path, b"one").unwrap();
        let file = File::open(&path).unwrap();
        let identity = Identity::of(&file).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&path, b"two").unwrap();
        let cache = Mutex::new(HashMap::new());
        let done = hash_job(
            Job {
                id: 1,
                pid: 2,
                file,
                identity,
            },
            &cache,
        );
        assert!(done.changed);
        assert!(cache.lock().unwrap().is_empty());
    }
}
