//! Embeds the guard into the CLI, so the README's one `cargo install` gives a user everything.
//!
//! - `guard.bin`: the `yolo-guard` program as a static Linux executable for the CLI's own
//!   architecture, built here by a nested `cargo build --target <this target>` with
//!   `+crt-static` (naming the target keeps crt-static away from build scripts and proc-macros,
//!   which must stay dynamic, and away from the rest of the workspace). Only when the CLI is
//!   built for Linux; on macOS or Windows there is no binary the engine could run, and the CLI
//!   builds the guard image from source instead. `YOLO_GUARD_BIN=/path` embeds a prebuilt one.
//! - `guard-src.tar`: the source of `yolo-protocol` and `yolo-guard`, a workspace manifest naming
//!   only them, and the workspace's lock file pruned to them (same versions), the build context
//!   of that from-source image (see `engine::guard_image`), which builds with `--locked`.
//!
//! Both are empty when the workspace is not next to this crate (a packaged crate): the CLI then
//! needs a guard image named in the user's config.

use sha2::Digest;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const GUARD_CRATES: [&str; 2] = ["crates/yolo-protocol", "crates/yolo-guard"];

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest.join("../..");
    let out = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-env-changed=YOLO_GUARD_BIN");
    println!("cargo:rerun-if-changed=build.rs");
    let have_source = GUARD_CRATES
        .iter()
        .all(|c| workspace.join(c).join("Cargo.toml").exists());
    if have_source {
        for c in GUARD_CRATES {
            println!("cargo:rerun-if-changed={}", workspace.join(c).display());
        }
        for f in ["Cargo.lock", "Cargo.toml"] {
            println!("cargo:rerun-if-changed={}", workspace.join(f).display());
        }
    }

    let binary = out.join("guard.bin");
    if let Some(prebuilt) = env::var_os("YOLO_GUARD_BIN") {
        let prebuilt = PathBuf::from(prebuilt);
        println!("cargo:rerun-if-changed={}", prebuilt.display());
        copy(&prebuilt, &binary);
    } else if have_source && env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let built = build_static_guard(&workspace, &out);
        copy(&built, &binary);
    } else {
        fs::write(&binary, b"").expect("writing an empty guard.bin");
    }

    let source = out.join("guard-src.tar");
    if have_source {
        fs::write(&source, source_tar(&workspace, &out)).expect("writing guard-src.tar");
    } else {
        fs::write(&source, b"").expect("writing an empty guard-src.tar");
    }
    // Their digests, so the CLI names the guard image and the shim's folder without reading
    // (and so paging in) the 4 MB binary on every `up`.
    for (file, digest) in [(&binary, "guard.digest"), (&source, "guard-src.digest")] {
        let bytes = fs::read(file).expect("reading what was embedded");
        let hex: String = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        fs::write(out.join(digest), &hex[..12]).expect("writing a digest");
    }
}

/// `cargo build --release -p yolo-guard --target <TARGET>` with crt-static (glibc targets; musl
/// is static already), in a target folder of its own next to the outer one, so the outer
/// build's lock is never waited on.
fn build_static_guard(workspace: &Path, out: &Path) -> PathBuf {
    let target = env::var("TARGET").expect("set by cargo");
    // OUT_DIR is <target dir>[/<triple>]/<profile>/build/<pkg>-<hash>/out.
    let target_dir = out
        .ancestors()
        .nth(4)
        .map(|dir| dir.join("yolo-guard-static"))
        .unwrap_or_else(|| out.join("yolo-guard-static"));
    let mut rustflags = String::new();
    if env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu") {
        rustflags.push_str("-Ctarget-feature=+crt-static");
    }
    let status = nested_cargo()
        .args([
            "build",
            "--release",
            "-p",
            "yolo-guard",
            "--target",
            &target,
        ])
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .args(["--config", "profile.release.strip=true"])
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags)
        .stdout(Stdio::null())
        .status()
        .expect("running cargo to build the static yolo-guard");
    assert!(
        status.success(),
        "building the static yolo-guard for {target} failed (see above); set YOLO_GUARD_BIN to a prebuilt one to skip it"
    );
    target_dir.join(&target).join("release").join("yolo-guard")
}

/// The cargo running this build, without the outer build's flags and wrappers (clippy's driver
/// among them): they are not ours.
fn nested_cargo() -> Command {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        command.env_remove(var);
    }
    command
}

fn copy(from: &Path, to: &Path) {
    if let Err(e) = fs::copy(from, to) {
        panic!("copying {}: {e}", from.display());
    }
}

/// The from-source build context: the two guard crates, a workspace manifest that names only
/// them, and the lock file pruned to them. Deterministic (sorted, zero mtimes) so the image
/// digest changes only when the source does.
fn source_tar(workspace: &Path, out: &Path) -> Vec<u8> {
    let mut files = Vec::new();
    for c in GUARD_CRATES {
        collect(workspace, &workspace.join(c), &mut files);
    }
    files.sort();
    let root = fs::read_to_string(workspace.join("Cargo.toml")).expect("reading Cargo.toml");
    let members = format!("members = {GUARD_CRATES:?}");
    let manifest: String = root
        .lines()
        .filter(|l| !l.starts_with("default-members"))
        .map(|l| {
            if l.starts_with("members") {
                members.clone()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut entries: Vec<(String, Vec<u8>)> = vec![("Cargo.toml".into(), manifest.into_bytes())];
    for rel in files {
        let data = fs::read(workspace.join(&rel)).expect("reading guard source");
        entries.push((rel, data));
    }
    let lock = pruned_lock(workspace, out, &entries);
    entries.insert(1, ("Cargo.lock".into(), lock));
    tar(&entries)
}

/// The workspace's Cargo.lock with only what the two guard crates need, at the versions it
/// locks. The whole lock names bollard, clap and the rest of the CLI's dependencies, which a
/// workspace of the guard crates does not use: `cargo build --locked` there refuses it ("cannot
/// update the lock file"). `cargo update --workspace --offline` in a copy of that workspace
/// rewrites the lock without them and updates only the workspace's own crates: every other
/// package keeps its locked version, and nothing is downloaded (it reads the registry index
/// cache the outer build filled; `cargo metadata` would prune the same way but wants the
/// sources of every platform's packages, which an offline machine may not have).
fn pruned_lock(workspace: &Path, out: &Path, entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let dir = out.join("guard-src");
    if dir.exists() {
        fs::remove_dir_all(&dir).expect("clearing the guard source copy");
    }
    for (rel, data) in entries {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().expect("a file in a folder"))
            .expect("copying the guard source");
        fs::write(&path, data).expect("copying the guard source");
    }
    copy(&workspace.join("Cargo.lock"), &dir.join("Cargo.lock"));
    let output = nested_cargo()
        .args(["update", "--workspace", "--offline", "--quiet"])
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .stdin(Stdio::null())
        .output()
        .expect("running cargo to prune the guard's lock file");
    assert!(
        output.status.success(),
        "pruning Cargo.lock to the guard crates failed (cargo update --workspace --offline in {}):\n{}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    fs::read(dir.join("Cargo.lock")).expect("reading the guard's lock file")
}

fn collect(workspace: &Path, dir: &Path, files: &mut Vec<String>) {
    let Ok(read) = fs::read_dir(dir) else { return };
    for entry in read.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            collect(workspace, &path, files);
        } else if let Ok(rel) = path.strip_prefix(workspace) {
            files.push(rel.to_string_lossy().into_owned());
        }
    }
}

/// A deterministic archive: fixed mode, owner and mtime, so equal sources give equal bytes.
fn tar(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, data) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        builder
            .append_data(&mut header, path, data.as_slice())
            .expect("packing the guard source");
    }
    builder.into_inner().expect("packing the guard source")
}
