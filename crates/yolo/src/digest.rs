//! What yolo keeps of a repository file it compares later (the approval snapshot, the watched
//! files): its content hash, and its bytes when small enough to show a diff. The agent chooses
//! these files, so reading one must cost bounded memory and time: the hash is streamed, and a
//! file over `MAX_HASHED` (a sparse 100 GB `Makefile`) is identified by its size, inode and
//! change time instead of its content. The change time (ctime) moves on every write and cannot
//! be set back from user space, so an edit that keeps the size and restores the mtime still
//! shows.

use sha2::{Digest as _, Sha256};
use std::io::Read;
use std::path::Path;

/// Files up to this size are hashed by content.
pub(crate) const MAX_HASHED: u64 = 64 << 20;

pub(crate) struct FileDigest {
    pub(crate) len: u64,
    /// sha256 of the content (hex), or of the size, inode and change time past `MAX_HASHED`.
    pub(crate) sha256: String,
    /// The bytes, when the file holds at most the `keep` asked for.
    pub(crate) bytes: Option<Vec<u8>>,
}

/// Open a file of the repository for reading, following a link: only a regular file. A FIFO
/// or a device the agent put where a file was (or behind a link to one) is an error, and the
/// open does not wait for it (`O_NONBLOCK`: the open of a FIFO blocks until a writer comes,
/// with yolo stuck in it and deaf to Ctrl-C).
pub(crate) fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    // Looked at before it is opened: opening a device (a link to one in /dev) can act.
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// `std::fs::read` of a file of the repository, through `open_regular`.
pub(crate) fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_regular(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `std::fs::read_to_string` of a file of the repository, through `open_regular`.
pub(crate) fn read_to_string(path: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    open_regular(path)?.read_to_string(&mut text)?;
    Ok(text)
}

/// Digest the file at `path` (following a link; a regular file only, `open_regular`), keeping
/// its bytes when it holds at most `keep`.
pub(crate) fn file(path: &Path, keep: u64) -> std::io::Result<FileDigest> {
    let mut unlimited = u64::MAX;
    file_within(path, keep, &mut unlimited)
}

/// `file`, reading at most `budget` bytes (taken from it): a larger file is identified by its
/// size, inode and change time. One look at many files shares a budget, so that a thousand
/// sparse 64 MiB files the agent made cost the host no more than one.
pub(crate) fn file_within(path: &Path, keep: u64, budget: &mut u64) -> std::io::Result<FileDigest> {
    open_within(open_regular(path)?, keep, budget)
}

/// `file_within` of a file already opened (through `open_regular` or
/// `fs_at::open_regular_at`).
pub(crate) fn open_within(
    mut file: std::fs::File,
    keep: u64,
    budget: &mut u64,
) -> std::io::Result<FileDigest> {
    let meta = file.metadata()?;
    let len = meta.len();
    if len > MAX_HASHED || len > *budget {
        use std::os::unix::fs::MetadataExt;
        let id = format!(
            "large file: {len} bytes, inode {}, changed {}.{:09}",
            meta.ino(),
            meta.ctime(),
            meta.ctime_nsec()
        );
        return Ok(FileDigest {
            len,
            sha256: hex::encode(Sha256::digest(id.as_bytes())),
            bytes: None,
        });
    }
    *budget -= len;
    let mut hasher = Sha256::new();
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    // Read at most MAX_HASHED + 1: a file that grows while read is not read forever.
    let mut limited = (&mut file).take(MAX_HASHED + 1);
    loop {
        let n = limited.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        if (kept.len() as u64) <= keep {
            kept.extend_from_slice(&buf[..n]);
        }
    }
    let small = (kept.len() as u64) <= keep;
    Ok(FileDigest {
        len,
        sha256: hex::encode(hasher.finalize()),
        bytes: small.then_some(kept),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files share one budget of bytes read: past it, a file is identified without reading it.
    #[test]
    fn a_shared_budget_bounds_what_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(&a, b"hello").unwrap();
        std::fs::write(&b, b"world").unwrap();
        let mut budget = 8;
        let first = file_within(&a, 10, &mut budget).unwrap();
        assert_eq!(first.bytes.as_deref(), Some(&b"hello"[..]));
        assert_eq!(budget, 3);
        let second = file_within(&b, 10, &mut budget).unwrap();
        assert!(second.bytes.is_none(), "read past the budget");
        assert_ne!(second.sha256, hex::encode(Sha256::digest(b"world")));
        assert_eq!(budget, 3);
    }

    /// A FIFO (the agent's `mkfifo Makefile`, or a link to one) is refused at once: opening
    /// it for reading would wait for a writer that never comes.
    #[cfg(unix)]
    #[test]
    fn a_fifo_or_a_link_to_one_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join(".p");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let link = dir.path().join("Makefile");
        std::os::unix::fs::symlink(".p", &link).unwrap();
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let results = (file(&fifo, 10).is_err(), file(&link, 10).is_err());
            let _ = done.send(results);
        });
        let results = wait
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("reading a FIFO hung");
        assert_eq!(results, (true, true));
    }

    #[test]
    fn small_files_keep_their_bytes_and_large_ones_only_a_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"hello").unwrap();
        let d = file(&path, 10).unwrap();
        assert_eq!(d.bytes.as_deref(), Some(&b"hello"[..]));
        assert_eq!(d.sha256, hex::encode(Sha256::digest(b"hello")));
        assert!(file(&path, 3).unwrap().bytes.is_none());
    }

    #[test]
    fn a_huge_sparse_file_is_identified_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Makefile");
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(100 << 30).unwrap();
        let before = file(&path, 1024).unwrap();
        assert!(before.bytes.is_none());
        // Same size, content rewritten: the change time moves, so the digest does.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(100 << 30)
            .unwrap();
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        w.write_all(b"x").unwrap();
        drop(w);
        assert_ne!(file(&path, 1024).unwrap().sha256, before.sha256);
    }
}
