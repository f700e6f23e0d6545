//! Where the guard's program comes from, and the image it is baked into.
//!
//! The guard runs `yolo-guard`, a static Linux executable that applies and verifies its nftables
//! ruleset over netlink itself, in an image holding only that binary and its folders (on
//! `guard_base_image`, by default `scratch`: nothing to pull or install, no network; the build
//! has no RUN step). The CLI picks its source once per `up`, in this order:
//! 1. `guard_image` in the user's config: an image the user names (it must hold
//!    `/usr/local/bin/yolo-guard`); used as it is.
//! 2. The binary embedded in this CLI (built by `build.rs` for the CLI's own target) when the
//!    engine runs Linux on the same architecture: baked into `yolo-guard:<version>-<digest>`.
//! 3. Otherwise (a macOS or Windows CLI, an engine of another architecture): the engine builds
//!    the guard from the source embedded in the CLI, in a multi-stage Dockerfile
//!    (`templates/guard/Dockerfile.source`), tagged `yolo-guard:<version>-src-<digest>`.
//!
//! Either way the binary is baked in once per version and digest, never copied into each new
//! guard container. `select` is pure and unit-tested; the engine only builds what it chose. Once
//! it has built a new image, it removes the guard images `stale` picks (older binaries and
//! bases), leaving those a container still uses.

use super::labels;
use crate::error::{Cause, Dependency, Error, Failure, Result};
use std::collections::BTreeMap;

/// `yolo-guard` for the CLI's own target; empty when the CLI was built for a host with no Linux
/// binary to offer.
static EMBEDDED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guard.bin"));
/// The guard's source as a build context (empty when built from a packaged crate).
static SOURCE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guard-src.tar"));
/// The first 12 hex digits of EMBEDDED's SHA-256 (`build.rs`): naming the image and the shim's
/// folder does not read the binary (a cold `up` would page in its 4 MB).
const EMBEDDED_DIGEST12: &str = include_str!(concat!(env!("OUT_DIR"), "/guard.digest"));
/// The same for SOURCE.
const SOURCE_DIGEST12: &str = include_str!(concat!(env!("OUT_DIR"), "/guard-src.digest"));

pub(crate) const DOCKERFILE: &str = include_str!("../../../../templates/guard/Dockerfile");
pub(crate) const DOCKERFILE_SOURCE: &str =
    include_str!("../../../../templates/guard/Dockerfile.source");
/// Where the program lives in the guard image.
pub(crate) const GUARD_BINARY: &str = "/usr/local/bin/yolo-guard";
/// The repository of the images yolo builds for the guard.
const REPOSITORY: &str = "yolo-guard";

/// An OS and CPU architecture in Docker's words (`linux`, `amd64`/`arm64`/...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Platform {
    pub(crate) os: String,
    pub(crate) arch: String,
}

impl Platform {
    /// The platform this CLI was built for, in Docker's architecture names.
    pub(crate) fn of_this_build() -> Platform {
        Platform {
            os: std::env::consts::OS.to_string(),
            arch: docker_arch(std::env::consts::ARCH).to_string(),
        }
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.arch)
    }
}

/// Rust's `std::env::consts::ARCH` → the `Arch` Docker reports (Go's GOARCH).
pub(crate) fn docker_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// What the guard image is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GuardSource {
    /// An image the user named; used as it is.
    Configured(String),
    /// The binary embedded in this CLI.
    Embedded,
    /// Built by the engine from the embedded source.
    FromSource,
}

/// What this CLI carries: a binary for `binary_for` (if any), and the source (if any).
#[derive(Debug, Clone)]
pub(crate) struct Carried {
    pub(crate) binary_for: Option<Platform>,
    pub(crate) source: bool,
}

impl Carried {
    pub(crate) fn this_build() -> Carried {
        Carried {
            binary_for: (!EMBEDDED.is_empty()).then(Platform::of_this_build),
            source: !SOURCE.is_empty(),
        }
    }
}

/// Pick the guard's source for an engine on `engine`.
pub(crate) fn select(
    configured: Option<&str>,
    carried: &Carried,
    engine: &Platform,
) -> Result<GuardSource> {
    if let Some(image) = configured {
        return Ok(GuardSource::Configured(image.to_string()));
    }
    if carried.binary_for.as_ref() == Some(engine) {
        return Ok(GuardSource::Embedded);
    }
    if carried.source && engine.os == "linux" {
        return Ok(GuardSource::FromSource);
    }
    Err(Error::dependency(Dependency::GuardBinary, format!(
        "this yolo carries no firewall guard for a {engine} engine{}; name a guard image built for it with guard_image = \"...\" in your yolo config (see docs/architecture.md, \"The guard binary\")",
        match &carried.binary_for {
            Some(p) => format!(" (only one for {p})"),
            None => String::new(),
        }
    )))
}

/// The tag of the image a source makes: yolo's version and a digest of what is baked in, so a
/// new binary makes a new image and an unchanged one reuses it.
pub(crate) fn tag(source: &GuardSource) -> String {
    match source {
        GuardSource::Configured(image) => image.clone(),
        GuardSource::Embedded => format!(
            "{REPOSITORY}:{}-{}",
            env!("CARGO_PKG_VERSION"),
            EMBEDDED_DIGEST12
        ),
        GuardSource::FromSource => format!(
            "{REPOSITORY}:{}-src-{}",
            env!("CARGO_PKG_VERSION"),
            SOURCE_DIGEST12
        ),
    }
}

/// An image as the engine lists it.
#[derive(Debug, Clone)]
pub(super) struct ListedImage {
    pub(crate) id: String,
    pub(crate) tags: Vec<String>,
    pub(crate) labels: BTreeMap<String, String>,
}

/// What to remove once the guard image `built` (an image id) is in place: the other images yolo
/// built for the guard, by their `yolo-guard:<this version>-` tags (a tag someone else gave one stays, and so
/// does the image under it), or by id when nothing names them any more (the image a rebuild
/// for a new base took the tag from). Only images with the guard image's labels count, with
/// every one of `marks` (`dev.yolo.managed` and the `YOLO_LABELS` of this run, so a test only
/// clears its own). The tag `tag` itself is never removed, whatever image holds it when the list
/// is read: two `up`s building the same tag at once each see the other's image as older, and
/// removing that tag by name would take it from under both.
pub(super) fn stale(
    built: &str,
    tag: &str,
    marks: &BTreeMap<String, String>,
    images: &[ListedImage],
) -> Vec<String> {
    let ours = |image: &ListedImage| {
        image.labels.contains_key(labels::GUARD_BASE)
            && marks.iter().all(|(k, v)| image.labels.get(k) == Some(v))
    };
    let mut names = Vec::new();
    for image in images.iter().filter(|i| i.id != built && ours(i)) {
        let tags: Vec<&String> = image
            .tags
            .iter()
            .filter(|t| t.as_str() != "<none>:<none>")
            .collect();
        if tags.is_empty() {
            names.push(image.id.clone());
        }
        // Only this version's: another yolo version in use beside this one keeps its image.
        let this_version = format!("{REPOSITORY}:{}-", env!("CARGO_PKG_VERSION"));
        names.extend(
            tags.into_iter()
                .filter(|t| t.starts_with(&this_version) && t.as_str() != tag)
                .cloned(),
        );
    }
    names
}

/// The exec audit's shim on the host: the embedded `yolo-guard` (run as `yolo-guard shim`),
/// written once per digest as `<data>/bin/shim-<digest>/shim`. That folder, holding nothing
/// else, is bind-mounted read-only as the folder of `SHIM_PATH` in the agent container: a
/// mount point cannot be renamed, whereas a folder holding a file mount can be moved aside by
/// root in the container and a fake shim planted in its place for the next `docker exec`. The
/// engine must run the same architecture as this CLI (a local engine).
pub(crate) fn shim_dir() -> Result<std::path::PathBuf> {
    #[cfg(unix)]
    use std::os::unix::fs::PermissionsExt;
    if EMBEDDED.is_empty() {
        return Err(Error::dependency(
            Dependency::GuardBinary,
            "this yolo carries no Linux guard binary to use as the exec audit's shim; turn the exec audit off with `[audit] exec = false` in yolo's config",
        ));
    }
    let bin = crate::store::bin_dir();
    std::fs::create_dir_all(&bin).map_err(|e| Error::io(&bin, e))?;
    let name = shim_file_name();
    let dir = bin.join(format!("shim-{EMBEDDED_DIGEST12}"));
    let complete = |dir: &std::path::Path| {
        std::fs::metadata(dir.join(name)).is_ok_and(|m| m.len() == EMBEDDED.len() as u64)
    };
    if complete(&dir) {
        return Ok(dir);
    }
    // Built aside and renamed into place whole, so no container ever mounts a half-written one.
    let temp = bin.join(format!(".shim-{EMBEDDED_DIGEST12}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&temp);
    std::fs::create_dir_all(&temp).map_err(|e| Error::io(&temp, e))?;
    let file = temp.join(name);
    std::fs::write(&file, EMBEDDED).map_err(|e| Error::io(&file, e))?;
    #[cfg(unix)]
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o555))
        .map_err(|e| Error::io(&file, e))?;
    if let Err(e) = std::fs::rename(&temp, &dir) {
        let _ = std::fs::remove_dir_all(&temp);
        // Another yolo put it there first.
        if !complete(&dir) {
            return Err(Error::io(&dir, e));
        }
    }
    Ok(dir)
}

/// The shim's file name, inside its folder, as inside the container.
fn shim_file_name() -> &'static str {
    yolo_protocol::SHIM_PATH
        .rsplit_once('/')
        .map_or(yolo_protocol::SHIM_PATH, |(_, name)| name)
}

/// The folder of `SHIM_PATH` in the container, where `shim_dir` is mounted.
pub(crate) fn shim_mount_point() -> &'static str {
    yolo_protocol::SHIM_PATH
        .rsplit_once('/')
        .map_or("/", |(dir, _)| dir)
}

#[cfg(test)]
fn digest12(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))[..12].to_string()
}

/// The build context (a tar) for a source that needs a build.
pub(crate) fn context(source: &GuardSource) -> Result<Option<Vec<u8>>> {
    let pack = |e: std::io::Error| {
        Error::failed(
            Failure::Archive,
            Cause::of("packing the guard image context", e),
        )
    };
    let mut tar = tar::Builder::new(Vec::new());
    let dockerfile = match source {
        GuardSource::Configured(_) => return Ok(None),
        GuardSource::Embedded => {
            append(&mut tar, "yolo-guard", 0o755, EMBEDDED).map_err(pack)?;
            DOCKERFILE
        }
        GuardSource::FromSource => {
            let mut archive = tar::Archive::new(SOURCE);
            for entry in archive.entries().map_err(pack)? {
                let mut entry = entry.map_err(pack)?;
                let mut header = entry.header().clone();
                let path = entry.path().map_err(pack)?.into_owned();
                tar.append_data(&mut header, path, &mut entry)
                    .map_err(pack)?;
            }
            DOCKERFILE_SOURCE
        }
    };
    append(&mut tar, "Dockerfile", 0o644, dockerfile.as_bytes()).map_err(pack)?;
    tar.into_inner().map(Some).map_err(pack)
}

/// One file of `data` into a tar for the engine (an image context, a guard's config).
pub(super) fn append(
    tar: &mut tar::Builder<Vec<u8>>,
    path: &str,
    mode: u32,
    data: &[u8],
) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(data.len() as u64);
    header.set_mode(mode);
    header.set_cksum();
    tar.append_data(&mut header, path, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linux(arch: &str) -> Platform {
        Platform {
            os: "linux".into(),
            arch: arch.into(),
        }
    }

    fn carries(binary: Option<Platform>, source: bool) -> Carried {
        Carried {
            binary_for: binary,
            source,
        }
    }

    #[test]
    fn a_configured_image_wins() {
        let got = select(
            Some("registry.example/guard:1"),
            &carries(Some(linux("amd64")), true),
            &linux("amd64"),
        );
        assert_eq!(
            got.unwrap(),
            GuardSource::Configured("registry.example/guard:1".into())
        );
    }

    #[test]
    fn the_embedded_binary_serves_an_engine_of_its_platform() {
        let got = select(None, &carries(Some(linux("amd64")), true), &linux("amd64"));
        assert_eq!(got.unwrap(), GuardSource::Embedded);
    }

    #[test]
    fn another_architecture_builds_from_source() {
        // An x86_64 Linux CLI talking to an arm64 engine (a remote one, say).
        let got = select(None, &carries(Some(linux("amd64")), true), &linux("arm64"));
        assert_eq!(got.unwrap(), GuardSource::FromSource);
        // A macOS CLI carries no binary at all.
        let got = select(None, &carries(None, true), &linux("arm64"));
        assert_eq!(got.unwrap(), GuardSource::FromSource);
    }

    #[test]
    fn nothing_to_offer_says_what_to_configure() {
        let err = select(None, &carries(Some(linux("amd64")), false), &linux("arm64"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("linux/arm64"), "{err}");
        assert!(err.contains("guard_image"), "{err}");
        assert!(err.contains("only one for linux/amd64"), "{err}");
        // A Windows-containers engine cannot run a Linux guard at all.
        let windows = Platform {
            os: "windows".into(),
            arch: "amd64".into(),
        };
        assert!(select(None, &carries(None, true), &windows).is_err());
    }

    fn listed(id: &str, tags: &[&str], labels: &[(&str, &str)]) -> ListedImage {
        ListedImage {
            id: id.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn a_new_guard_image_clears_the_older_ones_of_this_yolo_only() {
        let guard = [
            (labels::GUARD_BASE, "debian:bookworm-slim"),
            (labels::MANAGED, "true"),
        ];
        let marks = BTreeMap::from([(labels::MANAGED.to_string(), "true".to_string())]);
        let images = [
            listed("sha256:new", &["yolo-guard:0.2.0-bbb"], &guard),
            listed("sha256:old", &["yolo-guard:0.1.0-aaa"], &guard),
            listed("sha256:src", &["yolo-guard:0.1.0-src-ccc"], &guard),
            // Left by a rebuild for a new guard_base_image: no name any more.
            listed("sha256:dangling", &["<none>:<none>"], &guard),
            listed("sha256:untagged", &[], &guard),
            // Someone's own tag on an old guard image: that tag and the image stay.
            listed(
                "sha256:kept",
                &["yolo-guard:0.1.0-ddd", "registry.example/guard:1"],
                &guard,
            ),
            // Another yolo version's guard: it may be in use beside this one.
            listed("sha256:other-version", &["yolo-guard:0.0.1-fff"], &guard),
            // Images yolo did not build for the guard.
            listed("sha256:agent", &["yolo-guard:look-alike"], &[]),
            listed(
                "sha256:project",
                &["vsc-repo:latest"],
                &[(labels::MANAGED, "true")],
            ),
        ];
        assert_eq!(
            stale("sha256:new", "yolo-guard:0.2.0-bbb", &marks, &images),
            [
                "yolo-guard:0.1.0-aaa",
                "yolo-guard:0.1.0-src-ccc",
                "sha256:dangling",
                "sha256:untagged",
                "yolo-guard:0.1.0-ddd",
            ]
        );
        // Every mark must match: a run with YOLO_LABELS (a test) leaves others' images alone.
        let marked = BTreeMap::from([
            (labels::MANAGED.to_string(), "true".to_string()),
            ("dev.yolo.test".to_string(), "t1".to_string()),
        ]);
        let mut mine = guard.to_vec();
        mine.push(("dev.yolo.test", "t1"));
        let images = [
            listed("sha256:new", &["yolo-guard:0.2.0-bbb"], &mine),
            listed("sha256:mine", &["yolo-guard:0.1.0-aaa"], &mine),
            listed("sha256:theirs", &["yolo-guard:0.1.0-eee"], &guard),
        ];
        assert_eq!(
            stale("sha256:new", "yolo-guard:0.2.0-bbb", &marked, &images),
            ["yolo-guard:0.1.0-aaa"]
        );
        // Another `up` built the same tag meanwhile: the list shows it on the other image
        // (and ours untagged). The tag stays; only the image nothing names goes.
        let tag = format!("{REPOSITORY}:{}-bbb", env!("CARGO_PKG_VERSION"));
        let raced = [
            listed("sha256:new", &["<none>:<none>"], &guard),
            listed("sha256:theirs", &[tag.as_str()], &guard),
        ];
        assert_eq!(
            stale("sha256:new", &tag, &marks, &raced),
            Vec::<String>::new()
        );
    }

    #[test]
    fn architecture_names_follow_docker() {
        assert_eq!(docker_arch("x86_64"), "amd64");
        assert_eq!(docker_arch("aarch64"), "arm64");
        assert_eq!(docker_arch("s390x"), "s390x");
    }

    /// The `p_type` of each program header of a 64-bit little-endian ELF file.
    fn program_header_types(elf: &[u8]) -> Vec<u32> {
        let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap());
        let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap());
        let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap());
        assert_eq!(&elf[..4], b"\x7fELF", "an ELF file");
        assert_eq!(elf[4], 2, "ELFCLASS64");
        assert_eq!(elf[5], 1, "little-endian");
        let phoff = usize::try_from(u64_at(0x20)).unwrap();
        let phentsize = usize::from(u16_at(0x36));
        let phnum = usize::from(u16_at(0x38));
        (0..phnum).map(|i| u32_at(phoff + i * phentsize)).collect()
    }

    const PT_LOAD: u32 = 1;
    const PT_INTERP: u32 = 3;

    /// The digests `build.rs` wrote are those of what is embedded: the image's tag and the
    /// shim's folder change with the binary.
    #[test]
    fn the_digests_named_at_build_time_are_those_of_the_embedded_files() {
        assert_eq!(EMBEDDED_DIGEST12, digest12(EMBEDDED));
        assert_eq!(SOURCE_DIGEST12, digest12(SOURCE));
    }

    #[test]
    fn this_linux_build_carries_a_static_guard_and_its_source() {
        let carried = Carried::this_build();
        assert!(carried.source, "build.rs embeds the guard's source");
        if cfg!(target_os = "linux") {
            assert_eq!(carried.binary_for, Some(Platform::of_this_build()));
            let types = program_header_types(EMBEDDED);
            assert!(types.contains(&PT_LOAD), "an executable: {types:?}");
            // A dynamic executable names its loader (ld-linux) in PT_INTERP: a static one runs
            // in an image with no C library.
            assert!(
                !types.contains(&PT_INTERP),
                "a static executable, no program interpreter: {types:?}"
            );
        }
    }

    #[test]
    fn the_elf_reader_finds_an_interpreter() {
        // A minimal ELF64 header with two program headers at 0x40: PT_INTERP, PT_LOAD.
        let mut elf = vec![0u8; 0x40 + 2 * 0x38];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[0x20..0x28].copy_from_slice(&0x40u64.to_le_bytes());
        elf[0x36..0x38].copy_from_slice(&0x38u16.to_le_bytes());
        elf[0x38..0x3a].copy_from_slice(&2u16.to_le_bytes());
        elf[0x40..0x44].copy_from_slice(&PT_INTERP.to_le_bytes());
        elf[0x78..0x7c].copy_from_slice(&PT_LOAD.to_le_bytes());
        assert_eq!(program_header_types(&elf), vec![PT_INTERP, PT_LOAD]);
    }

    #[test]
    fn tags_carry_version_and_digest() {
        let embedded = tag(&GuardSource::Embedded);
        let prefix = format!("yolo-guard:{}-", env!("CARGO_PKG_VERSION"));
        assert!(embedded.starts_with(&prefix), "{embedded}");
        assert_eq!(embedded.len(), prefix.len() + 12);
        assert!(tag(&GuardSource::FromSource).contains("-src-"));
    }

    #[test]
    fn the_source_context_is_a_workspace_of_the_guard_crates_only() {
        let context = context(&GuardSource::FromSource).unwrap().unwrap();
        let mut archive = tar::Archive::new(context.as_slice());
        let mut names = Vec::new();
        let mut manifest = String::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let name = entry.path().unwrap().display().to_string();
            if name == "Cargo.toml" {
                std::io::Read::read_to_string(&mut entry, &mut manifest).unwrap();
            }
            names.push(name);
        }
        for needed in [
            "Dockerfile",
            "Cargo.lock",
            "crates/yolo-guard/src/main.rs",
            "crates/yolo-protocol/src/lib.rs",
        ] {
            assert!(names.iter().any(|n| n == needed), "{needed} in {names:?}");
        }
        assert!(!names.iter().any(|n| n.starts_with("crates/yolo/")));
        let parsed: toml::Value = toml::from_str(&manifest).unwrap();
        let members = parsed["workspace"]["members"].as_array().unwrap();
        assert_eq!(members.len(), 2, "{members:?}");
        assert!(parsed["workspace"].get("default-members").is_none());
    }

    /// The source context resolves with its own lock as it is (`--locked`, as Dockerfile.source
    /// builds it), and that lock holds the guard crates and their dependencies only.
    #[test]
    fn the_source_context_resolves_with_its_lock_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let context = context(&GuardSource::FromSource).unwrap().unwrap();
        tar::Archive::new(context.as_slice())
            .unpack(dir.path())
            .unwrap();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let host = std::process::Command::new(&cargo)
            .arg("-vV")
            .output()
            .unwrap();
        let host = String::from_utf8_lossy(&host.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
            .expect("cargo -vV names the host");
        // --filter-platform: only this platform's packages, which this build has downloaded
        // (--offline). The lock check itself covers every platform.
        let output = std::process::Command::new(&cargo)
            .args(["metadata", "--locked", "--offline", "--format-version", "1"])
            .args(["--filter-platform", &host])
            .current_dir(dir.path())
            .env_remove("CARGO_TARGET_DIR")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "cargo metadata --locked in the source context:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let name_of = |id: &serde_json::Value| {
            metadata["packages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["id"] == *id)
                .map(|p| p["name"].as_str().unwrap().to_string())
                .unwrap_or_else(|| panic!("no package {id}"))
        };
        let members: Vec<String> = metadata["workspace_members"]
            .as_array()
            .unwrap()
            .iter()
            .map(name_of)
            .collect();
        assert_eq!(members.len(), 2, "{members:?}");
        for member in ["yolo-guard", "yolo-protocol"] {
            assert!(members.iter().any(|m| m == member), "{members:?}");
        }
        // Every resolved package is reachable from the two guard crates.
        let nodes = metadata["resolve"]["nodes"].as_array().unwrap();
        let mut reached: Vec<&serde_json::Value> = metadata["workspace_members"]
            .as_array()
            .unwrap()
            .iter()
            .collect();
        let mut next = 0;
        while next < reached.len() {
            let node = nodes.iter().find(|n| n["id"] == *reached[next]).unwrap();
            for dep in node["deps"].as_array().unwrap() {
                if !reached.contains(&&dep["pkg"]) {
                    reached.push(&dep["pkg"]);
                }
            }
            next += 1;
        }
        assert_eq!(reached.len(), nodes.len(), "nothing unreachable resolved");
        // And the lock itself (every platform) names none of the CLI's own dependencies.
        let lock = std::fs::read_to_string(dir.path().join("Cargo.lock")).unwrap();
        let lock: toml::Value = toml::from_str(&lock).unwrap();
        let locked: Vec<&str> = lock["package"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        for cli_only in ["yolo", "bollard", "clap", "indicatif", "tar"] {
            assert!(
                !locked.contains(&cli_only),
                "{cli_only} in the guard's lock"
            );
        }
        for needed in ["yolo-guard", "yolo-protocol", "nftables", "tokio"] {
            assert!(locked.contains(&needed), "{needed} in the guard's lock");
        }
    }
}
