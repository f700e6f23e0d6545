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

/// Digest the file at `path` (following a link), keeping its bytes when it holds at most `keep`.
pub(crate) fn file(path: &Path, keep: u64) -> std::io::Result<FileDigest> {
    let mut file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    let len = meta.len();
    if len > MAX_HASHED {
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
