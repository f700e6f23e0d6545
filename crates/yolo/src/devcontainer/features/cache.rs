//! yolo's Feature cache, under its data dir, keyed by content digest:
//!
//! - `manifests/<hex>.json`: an OCI manifest, named by its own sha256 (what a lock file pins);
//! - `blobs/<hex>`: a layer or tarball as fetched, named by its sha256;
//! - `features/<hex>/`: that blob extracted (what `Resolved::dir` points at);
//! - `local/<hex>/`: a copy of a local Feature folder, named by the digest of its content.
//!
//! Everything is written to a temporary name and renamed into place, so a present entry is a
//! complete one and an interrupted fetch leaves nothing half-made. Entries are verified when
//! written (digest of the bytes) and trusted when read: the cache is the user's own.

use sha2::{Digest as _, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// `sha256:<hex>` of `bytes`.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The hex of a `sha256:<hex>` digest, when it is one (so it can name a file).
pub(crate) fn hex_of(digest: &str) -> Option<&str> {
    digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()))
}

pub(crate) struct Cache {
    root: PathBuf,
}

impl Cache {
    pub(crate) fn new(root: &Path) -> Self {
        Cache {
            root: root.to_path_buf(),
        }
    }

    fn path(&self, kind: &str, digest: &str, suffix: &str) -> Option<PathBuf> {
        let hex = hex_of(digest)?;
        Some(self.root.join(kind).join(format!("{hex}{suffix}")))
    }

    /// A cached manifest by its digest, if present and still matching it.
    pub(crate) fn manifest(&self, digest: &str) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.path("manifests", digest, ".json")?).ok()?;
        (sha256(&bytes) == digest).then_some(bytes)
    }

    pub(crate) fn put_manifest(&self, digest: &str, bytes: &[u8]) -> std::io::Result<()> {
        let path = self
            .path("manifests", digest, ".json")
            .ok_or_else(bad_digest)?;
        crate::store::replace(&path, bytes)
    }

    /// The extracted folder of a blob, when cached.
    pub(crate) fn extracted(&self, digest: &str) -> Option<PathBuf> {
        self.path("features", digest, "").filter(|p| p.is_dir())
    }

    /// Keep `bytes` (whose digest the caller verified) and extract them; returns the folder.
    pub(crate) fn put_blob(&self, digest: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        let blob = self.path("blobs", digest, "").ok_or_else(bad_digest)?;
        crate::store::replace(&blob, bytes)?;
        let dir = self.path("features", digest, "").ok_or_else(bad_digest)?;
        if dir.is_dir() {
            return Ok(dir);
        }
        let tmp = temp_sibling(&dir)?;
        let result = extract(bytes, &tmp).and_then(|_| std::fs::rename(&tmp, &dir));
        if let Err(e) = result {
            let _ = std::fs::remove_dir_all(&tmp);
            if dir.is_dir() {
                return Ok(dir); // another yolo extracted it meanwhile
            }
            return Err(e);
        }
        Ok(dir)
    }

    /// Copy the local Feature folder `src` into the cache; returns (folder, digest of content).
    pub(crate) fn put_local(&self, src: &Path) -> std::io::Result<(PathBuf, String)> {
        let digest = digest_dir(src)?;
        let dir = self.path("local", &digest, "").ok_or_else(bad_digest)?;
        if dir.is_dir() {
            return Ok((dir, digest));
        }
        let tmp = temp_sibling(&dir)?;
        let result = copy_dir(src, &tmp).and_then(|_| std::fs::rename(&tmp, &dir));
        if let Err(e) = result {
            let _ = std::fs::remove_dir_all(&tmp);
            if !dir.is_dir() {
                return Err(e);
            }
        }
        Ok((dir, digest))
    }
}

fn bad_digest() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a sha256 digest")
}

fn temp_sibling(path: &Path) -> std::io::Result<PathBuf> {
    let parent = path.parent().ok_or_else(bad_digest)?;
    std::fs::create_dir_all(parent)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(parent.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple())))
}

/// Extract a tar (gzip-compressed or not) into `dir`. Entries that would land outside it are
/// refused by `tar` itself; so are links whose target leads out of the Feature (the folder goes
/// into an image build, and a link to `/home/you/.ssh/id_rsa` there must not pull that file in)
/// and anything but files, folders and links. Dot-files at the top are skipped as the
/// reference CLI does.
pub(crate) fn extract(bytes: &[u8], dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let reader: Box<dyn Read> = if bytes.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::GzDecoder::new(bytes))
    } else {
        Box::new(bytes)
    };
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(true);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let first = path
            .components()
            .find(|c| !matches!(c, std::path::Component::CurDir));
        if let Some(std::path::Component::Normal(first)) = first {
            if first.to_string_lossy().starts_with('.') {
                continue;
            }
        }
        check_entry(&entry, &path)?;
        entry.unpack_in(dir)?;
    }
    Ok(())
}

fn check_entry<R: Read>(entry: &tar::Entry<R>, path: &Path) -> std::io::Result<()> {
    let refuse = |what: String| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the archive's entry {} {what}; refusing it", path.display()),
        )
    };
    let kind = entry.header().entry_type();
    match kind {
        tar::EntryType::Regular | tar::EntryType::Directory | tar::EntryType::Continuous => Ok(()),
        tar::EntryType::Symlink | tar::EntryType::Link => {
            let target = entry
                .link_name()?
                .ok_or_else(|| refuse("is a link without a target".into()))?;
            // A symbolic link is relative to its folder, a hard link to the archive's root.
            let base = if kind == tar::EntryType::Symlink {
                path.parent().unwrap_or(Path::new("")).to_path_buf()
            } else {
                PathBuf::new()
            };
            if target.is_absolute() || escapes(&base.join(&target)) {
                return Err(refuse(format!(
                    "links to {}, outside the Feature",
                    target.display()
                )));
            }
            Ok(())
        }
        other => Err(refuse(format!(
            "is of type {other:?}, not a file, folder or link"
        ))),
    }
}

/// Does the relative `path` climb above its root (`a/../../b`)?
fn escapes(path: &Path) -> bool {
    let mut depth: i64 = 0;
    for component in path.components() {
        match component {
            std::path::Component::ParentDir => depth -= 1,
            std::path::Component::Normal(_) => depth += 1,
            std::path::Component::CurDir => {}
            _ => return true,
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

/// sha256 over the folder's files (relative path, mode, content; links by target), sorted:
/// the same content gives the same digest wherever the folder is.
pub(crate) fn digest_dir(dir: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut files = Vec::new();
    walk(dir, Path::new(""), &mut files)?;
    files.sort();
    for rel in files {
        let path = dir.join(&rel);
        let meta = std::fs::symlink_metadata(&path)?;
        hasher.update(rel.to_string_lossy().as_bytes());
        hasher.update([0]);
        use std::os::unix::fs::PermissionsExt;
        if meta.file_type().is_symlink() {
            hasher.update(b"link\0");
            hasher.update(std::fs::read_link(&path)?.to_string_lossy().as_bytes());
        } else if meta.is_dir() {
            hasher.update(b"dir\0");
        } else {
            hasher.update(format!("file {:o}\0", meta.permissions().mode() & 0o777).as_bytes());
            let mut file = std::fs::File::open(&path)?;
            std::io::copy(&mut file, &mut hasher)?;
        }
        hasher.update([0]);
    }
    Ok(format!("sha256:{}", hex::encode(hasher.finalize())))
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(root.join(rel))? {
        let entry = entry?;
        let rel = rel.join(entry.file_name());
        let kind = entry.file_type()?;
        out.push(rel.clone());
        if kind.is_dir() {
            walk(root, &rel, out)?;
        }
    }
    Ok(())
}

fn copy_dir(src: &Path, dst: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dst)?;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&from)?, &to)?;
        } else if kind.is_dir() {
            copy_dir(&from, &to)?;
        } else {
            std::fs::copy(&from, &to)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_are_extracted_once_and_found_by_digest() {
        let root = tempfile::tempdir().unwrap();
        let cache = Cache::new(root.path());
        let mut builder = tar::Builder::new(Vec::new());
        // `devcontainer features package` puts the folder itself first, as "./".
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_mode(0o755);
        header.set_size(0);
        builder
            .append_data(&mut header, "./", std::io::empty())
            .unwrap();
        let mut header = tar::Header::new_gnu();
        let body = b"#!/bin/sh\necho hi\n";
        header.set_size(body.len() as u64);
        header.set_mode(0o755);
        builder
            .append_data(&mut header, "./install.sh", &body[..])
            .unwrap();
        let mut header = tar::Header::new_gnu();
        header.set_size(1);
        builder
            .append_data(&mut header, "./.hidden", &b"x"[..])
            .unwrap();
        let bytes = builder.into_inner().unwrap();
        let digest = sha256(&bytes);
        assert!(cache.extracted(&digest).is_none());
        let dir = cache.put_blob(&digest, &bytes).unwrap();
        assert_eq!(std::fs::read(dir.join("install.sh")).unwrap(), body);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("install.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert!(!dir.join(".hidden").exists());
        assert_eq!(cache.extracted(&digest), Some(dir));
        cache.put_manifest(&digest, &bytes).unwrap();
        assert_eq!(cache.manifest(&digest), Some(bytes));
        assert!(cache.manifest(&sha256(b"other")).is_none());
    }

    fn tar_with_link(name: &str, target: &str) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        builder.append_link(&mut header, name, target).unwrap();
        builder.into_inner().unwrap()
    }

    #[test]
    fn a_link_chain_cannot_hard_link_a_host_file_into_the_feature() {
        // `a -> .` is inside; `a/a/…/../../…/<host file>` stays inside lexically (the check
        // above) but leads out through the link: the extraction itself must refuse it, or the
        // host file would be copied into the image build.
        let root = tempfile::tempdir().unwrap();
        let secret = root.path().join("secret");
        std::fs::write(&secret, "host secret").unwrap();
        let cache = Cache::new(&root.path().join("cache"));
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        builder.append_link(&mut header, "a", ".").unwrap();
        let target = format!(
            "{}{}{}",
            "a/".repeat(30),
            "../".repeat(30),
            secret.display().to_string().trim_start_matches('/')
        );
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Link);
        header.set_size(0);
        builder.append_link(&mut header, "h", &target).unwrap();
        let bytes = builder.into_inner().unwrap();
        let result = cache.put_blob(&sha256(&bytes), &bytes);
        if let Ok(dir) = result {
            let linked = std::fs::read_to_string(dir.join("h")).unwrap_or_default();
            assert_ne!(linked, "host secret", "a host file reached the Feature");
        }
    }

    #[test]
    fn links_out_of_the_feature_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let cache = Cache::new(root.path());
        for (name, target) in [
            ("./key", "/home/you/.ssh/id_rsa"),
            ("./sub/up", "../../etc/passwd"),
        ] {
            let bytes = tar_with_link(name, target);
            let err = cache.put_blob(&sha256(&bytes), &bytes).unwrap_err();
            assert!(err.to_string().contains("outside the Feature"), "{err}");
            assert!(
                cache.extracted(&sha256(&bytes)).is_none(),
                "nothing half-made"
            );
        }
        let bytes = tar_with_link("./sub/ok", "../install.sh");
        let dir = cache.put_blob(&sha256(&bytes), &bytes).unwrap();
        assert!(std::fs::symlink_metadata(dir.join("sub/ok"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(escapes(Path::new("a/../../b")));
        assert!(!escapes(Path::new("a/../b")));
    }

    #[test]
    fn local_folders_are_copied_by_content() {
        let root = tempfile::tempdir().unwrap();
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("install.sh"), "echo 1").unwrap();
        std::fs::create_dir(src.path().join("sub")).unwrap();
        std::fs::write(src.path().join("sub/x"), "x").unwrap();
        let cache = Cache::new(root.path());
        let (dir, digest) = cache.put_local(src.path()).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("sub/x")).unwrap(), "x");
        let (_, same) = cache.put_local(src.path()).unwrap();
        assert_eq!(digest, same);
        std::fs::write(src.path().join("install.sh"), "echo 2").unwrap();
        let (dir2, changed) = cache.put_local(src.path()).unwrap();
        assert_ne!(digest, changed);
        assert_eq!(
            std::fs::read_to_string(dir2.join("install.sh")).unwrap(),
            "echo 2"
        );
    }
}
