//! Descriptor-relative access to the mounted folder, at any depth. The agent can make folders
//! deeper than the system's `PATH_MAX` (one `chdir` at a time, which no path limit stops), and
//! a file there cannot be opened, read or even looked at by its full path (`ENAMETOOLONG`).
//! The host's look at the watched files (`commands::watched`) reaches it the way the agent
//! made it: folder by folder, each opened relative to the descriptor of the one above
//! (`openat`, `fstatat`, `readlinkat`, `readdir` on a folder's descriptor; POSIX calls that
//! Linux and macOS both have).
//!
//! A walk holds one descriptor per level only near the top (`HELD`) and every `STRIDE` levels
//! below: a deep chain would otherwise use up the process's descriptors (macOS allows 256 by
//! default). A folder whose descriptor was let go is opened again, name by name from the
//! nearest one held and never through a link, and must be the folder it was (device and
//! inode), or it is reported as left out.

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Levels below the top that keep their descriptor while the walk is below them.
const HELD: usize = 64;
/// Below `HELD`, every this many levels keep theirs.
const STRIDE: usize = 64;
/// Descriptors one walk holds at most; past the depth this allows (about 8,000 levels),
/// folders are reported as left out.
const MAX_HELD: usize = 192;

/// What an entry of a folder is, as `lstat` says (a link is not followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Symlink,
    Other,
}

impl Kind {
    /// What `st_mode` (from `lstat`) says.
    pub(crate) fn of_mode(mode: u32) -> Kind {
        Kind::of(FileType::from_raw_mode(mode as _)).unwrap_or(Kind::Other)
    }

    fn of(t: FileType) -> Option<Kind> {
        Some(match t {
            FileType::Directory => Kind::Dir,
            FileType::RegularFile => Kind::File,
            FileType::Symlink => Kind::Symlink,
            FileType::Unknown => return None,
            _ => Kind::Other,
        })
    }
}

/// One entry the walk met.
pub(crate) struct Entry<'a> {
    /// Relative to the walk's root.
    pub(crate) rel: &'a Path,
    /// 1 for the root's own entries.
    pub(crate) depth: usize,
    pub(crate) kind: Kind,
    /// The folder holding it, open: look at its neighbours through this.
    pub(crate) dir: BorrowedFd<'a>,
    pub(crate) name: &'a OsStr,
}

/// What the walk does after an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Go on; into it when it is a folder.
    Enter,
    /// Go on, not into it.
    Skip,
    /// End the walk.
    Stop,
}

struct Frame {
    /// Relative to the root ("" for the root).
    rel: PathBuf,
    name: OsString,
    /// Its entries, in name order, and the next one to visit.
    names: Vec<(OsString, Option<Kind>)>,
    next: usize,
    fd: Option<OwnedFd>,
    id: (u64, u64),
}

/// Walk the folder `root` in name order (the same each time, so a walk stopped at a cap stops
/// at the same place), never following links, at any depth. `visit` sees every entry and says
/// whether to enter it; `left_out` hears of each folder that could not be read. A folder holds
/// at most `cap` entries read (past it, the walk is past any cap its caller has).
pub(crate) fn walk(
    root: &Path,
    cap: usize,
    mut visit: impl FnMut(&Entry) -> Step,
    mut left_out: impl FnMut(&Path, io::Error),
) {
    let root_fd = match rustix::fs::open(root, dir_flags(false), Mode::empty()) {
        Ok(fd) => fd,
        Err(e) => return left_out(Path::new(""), e.into()),
    };
    let top = match frame(root_fd, PathBuf::new(), OsString::new(), cap) {
        Ok(top) => top,
        Err(e) => return left_out(Path::new(""), e),
    };
    let mut stack = vec![top];
    while let Some(at) = stack.len().checked_sub(1) {
        if stack[at].next >= stack[at].names.len() {
            stack.pop();
            continue;
        }
        if stack[at].fd.is_none() {
            if let Err(e) = reopen(&mut stack) {
                let gone = stack.pop().expect("the frame just looked at");
                left_out(&gone.rel, e);
                continue;
            }
        }
        let open = stack.iter().filter(|f| f.fd.is_some()).count();
        let top = &mut stack[at];
        let (name, kind) = top.names[top.next].clone();
        top.next += 1;
        let dir = top.fd.as_ref().expect("opened above");
        let Some(kind) = kind.or_else(|| {
            let st = rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
            Kind::of(FileType::from_raw_mode(st.st_mode))
        }) else {
            // Gone since the folder was read.
            continue;
        };
        let rel = top.rel.join(&name);
        let entry = Entry {
            rel: &rel,
            depth: at + 1,
            kind,
            dir: dir.as_fd(),
            name: &name,
        };
        let step = visit(&entry);
        if step == Step::Stop {
            return;
        }
        if kind != Kind::Dir || step == Step::Skip {
            continue;
        }
        if open >= MAX_HELD {
            left_out(
                &rel,
                io::Error::other("deeper than yolo's walk goes (about 8,000 levels)"),
            );
            continue;
        }
        let opened = rustix::fs::openat(dir, &name, dir_flags(true), Mode::empty())
            .map_err(io::Error::from)
            .and_then(|fd| frame(fd, rel.clone(), name.clone(), cap));
        match opened {
            Ok(child) => {
                // Let go of this folder's descriptor unless it is one kept: it is opened
                // again when the walk comes back to it.
                if !kept(at) {
                    stack[at].fd = None;
                }
                stack.push(child);
            }
            Err(e) => left_out(&rel, e),
        }
    }
}

/// Read the folder open at `fd`.
fn frame(fd: OwnedFd, rel: PathBuf, name: OsString, cap: usize) -> io::Result<Frame> {
    let st = rustix::fs::fstat(&fd)?;
    let mut names = Vec::new();
    let mut dir = Dir::read_from(&fd)?;
    while let Some(entry) = dir.read() {
        let entry = entry?;
        let bytes = entry.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        names.push((
            OsStr::from_bytes(bytes).to_os_string(),
            Kind::of(entry.file_type()),
        ));
        if names.len() > cap {
            break;
        }
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Frame {
        rel,
        name,
        names,
        next: 0,
        fd: Some(fd),
        id: (st.st_dev as u64, st.st_ino as u64),
    })
}

/// Open the last frame's folder again, name by name from the nearest frame that kept its
/// descriptor, never through a link; it must be the same folder as when it was read.
fn reopen(stack: &mut [Frame]) -> io::Result<()> {
    let last = stack.len() - 1;
    let from = (0..last)
        .rev()
        .find(|&i| stack[i].fd.is_some())
        .ok_or_else(|| io::Error::other("no folder above is open"))?;
    let mut fd: Option<OwnedFd> = None;
    for i in from + 1..=last {
        let at = fd.as_ref().map_or_else(
            || stack[from].fd.as_ref().expect("found above").as_fd(),
            |fd| fd.as_fd(),
        );
        fd = Some(rustix::fs::openat(
            at,
            &stack[i].name,
            dir_flags(true),
            Mode::empty(),
        )?);
    }
    let fd = fd.expect("at least one level");
    let st = rustix::fs::fstat(&fd)?;
    if (st.st_dev as u64, st.st_ino as u64) != stack[last].id {
        return Err(io::Error::other("the folder was replaced during the look"));
    }
    stack[last].fd = Some(fd);
    Ok(())
}

/// Whether the folder `depth` levels below the root keeps its descriptor while the walk is
/// below it.
fn kept(depth: usize) -> bool {
    depth < HELD || depth.is_multiple_of(STRIDE)
}

fn dir_flags(nofollow: bool) -> OFlags {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    if nofollow {
        flags | OFlags::NOFOLLOW
    } else {
        flags
    }
}

/// The folder holding `rel` (relative, below `root`) and its last name, at any depth. Links
/// on the way are followed, as a lookup of the whole path would.
pub(crate) fn parent(root: &Path, rel: &Path) -> io::Result<(OwnedFd, OsString)> {
    let mut parts: Vec<&OsStr> = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => parts.push(n),
            Component::CurDir => {}
            _ => return Err(io::Error::other("not a plain relative path")),
        }
    }
    let name = parts
        .pop()
        .ok_or_else(|| io::Error::other("an empty path"))?;
    let mut fd = rustix::fs::open(root, dir_flags(false), Mode::empty())?;
    for part in parts {
        fd = rustix::fs::openat(&fd, part, dir_flags(false), Mode::empty())?;
    }
    Ok((fd, name.to_os_string()))
}

/// `lstat` of `name` in `dir`: what it is (a link is not followed).
pub(crate) fn kind_at(dir: BorrowedFd, name: &OsStr) -> io::Result<Kind> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(Kind::of(FileType::from_raw_mode(st.st_mode)).unwrap_or(Kind::Other))
}

/// The target of the link `name` in `dir`.
pub(crate) fn read_link_at(dir: BorrowedFd, name: &OsStr) -> io::Result<PathBuf> {
    let target = rustix::fs::readlinkat(dir, name, Vec::new())?;
    Ok(PathBuf::from(OsStr::from_bytes(target.as_bytes())))
}

/// Whether `path` (relative to `dir`, links followed) is a folder, or a file with an execute
/// bit: what git's `access(X_OK)` lets it enter.
pub(crate) fn enterable_at(dir: BorrowedFd, path: &Path) -> bool {
    rustix::fs::statat(dir, path, AtFlags::empty()).is_ok_and(|st| {
        FileType::from_raw_mode(st.st_mode) == FileType::Directory || st.st_mode & 0o111 != 0
    })
}

/// Open `name` in `dir` for reading, following a link: only a regular file, and without
/// waiting for a FIFO (as `digest::open_regular`).
pub(crate) fn open_regular_at(dir: BorrowedFd, name: &Path) -> io::Result<std::fs::File> {
    let not_regular = || io::Error::new(io::ErrorKind::InvalidInput, "not a regular file");
    let st = rustix::fs::statat(dir, name, AtFlags::empty())?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(not_regular());
    }
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let file = std::fs::File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

#[cfg(test)]
/// Make `levels` folders `name` below `root`, one `openat` at a time (the full path soon
/// passes PATH_MAX), and a file `leaf` holding `text` at the bottom (a folder when `leaf` ends
/// with `/`). For the tests here and in `commands::watched`.
pub(crate) fn deep(root: &Path, name: &str, levels: usize, leaf: &str, text: &str) {
    let mut fd = rustix::fs::open(root, dir_flags(false), Mode::empty()).unwrap();
    for _ in 0..levels {
        match rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => panic!("{e}"),
        }
        fd = rustix::fs::openat(&fd, name, dir_flags(true), Mode::empty()).unwrap();
    }
    if let Some(folder) = leaf.strip_suffix('/') {
        rustix::fs::mkdirat(&fd, folder, Mode::from_raw_mode(0o755)).unwrap();
        return;
    }
    let file = rustix::fs::openat(
        &fd,
        leaf,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .unwrap();
    std::io::Write::write_all(&mut std::fs::File::from(file), text.as_bytes()).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past PATH_MAX and past the levels that keep their descriptor (the folders between are
    /// opened again on the way back): every file is met, in name order, and read through
    /// `parent`.
    #[test]
    fn the_walk_reaches_files_at_any_depth() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let name = "d".repeat(100);
        deep(root, &name, 60, "Makefile", "one\n");
        deep(root, "e", 300, "Makefile", "two\n");
        deep(root, "e", 150, "b", "");
        let mut files = Vec::new();
        walk(
            root,
            1000,
            |e| {
                if e.kind == Kind::File {
                    files.push(e.rel.to_path_buf());
                }
                Step::Enter
            },
            |rel, e| panic!("{}: {e}", rel.display()),
        );
        assert_eq!(files.len(), 3, "{files:?}");
        assert!(files[0].as_os_str().len() > 4096);
        assert!(files[1].ends_with("b") && files[2].ends_with("Makefile"));
        let (dir, name) = parent(root, &files[0]).unwrap();
        assert_eq!(kind_at(dir.as_fd(), &name).unwrap(), Kind::File);
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut open_regular_at(dir.as_fd(), Path::new(&name)).unwrap(),
            &mut text,
        )
        .unwrap();
        assert_eq!(text, "one\n");
    }
}
