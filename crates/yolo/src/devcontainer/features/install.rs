//! The image with Features: the build context (one folder per Feature, copied from `Resolved::dir`,
//! plus the generated files) and the Dockerfile that installs them `FROM` the base image, as the
//! reference CLI's `getFeatureLayers` does for Features v2:
//!
//! - `USER root`; the built-in variables `_CONTAINER_USER`, `_REMOTE_USER` in
//!   `/tmp/dev-container-features/devcontainer-features.builtin.env`, with `_CONTAINER_USER_HOME`
//!   and `_REMOTE_USER_HOME` appended from the image's passwd;
//! - per Feature, in install order: its `containerEnv` as `ENV` (later Features see it), `COPY`
//!   of its folder, `RUN` of a wrapper that exports the built-ins and the Feature's options
//!   (`devcontainer-features.env`) and runs its `install.sh`;
//! - `USER` back to the image's user.
//!
//! Everything is derived from the inputs alone (no time, no random names, sorted maps), so the
//! same Features give the same text and files: `inputs_digest` keys the built image and a second
//! `up` builds nothing. The Dockerfile and wrappers are written here rather than with a template
//! crate: they are a few fixed lines, and the quoting rules (shell single quotes, Dockerfile
//! `ENV` double quotes) are the part that matters.

use super::Resolved;
use crate::devcontainer::metadata::Entry;
use crate::error::{Error, Failure, Result};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the Features' folders go in the image during the build (the reference CLI's path).
pub(crate) const DEST: &str = "/tmp/dev-container-features";
/// The built-in variables file, in `DEST` and at the context root.
const BUILTIN_ENV: &str = "devcontainer-features.builtin.env";
/// The Feature's options as variables, in its folder.
const FEATURE_ENV: &str = "devcontainer-features.env";
/// The wrapper that runs `install.sh` with the variables set, in its folder.
const WRAPPER: &str = "devcontainer-features-install.sh";
/// A line the wrapper prints first; the build's output tells by it which Feature was
/// installing when a step failed.
pub(crate) const MARKER: &str = "yolo: installing Feature ";

/// What decides the users the install scripts see.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Users {
    /// The user the base image runs as (`Config.User`), `root` when it sets none; the image
    /// goes back to it after the install.
    pub(crate) image_user: String,
    /// `_CONTAINER_USER`: the config's `containerUser`, else the image's user.
    pub(crate) container_user: String,
    /// `_REMOTE_USER`: the config's `remoteUser`, else the container user.
    pub(crate) remote_user: String,
}

impl Users {
    /// As the reference CLI's `findContainerUsers`: each falls back to the one before.
    pub(crate) fn new(
        image_user: Option<&str>,
        container_user: Option<&str>,
        remote_user: Option<&str>,
    ) -> Users {
        let set = |u: Option<&str>| u.map(str::trim).filter(|u| !u.is_empty()).map(String::from);
        let image_user = set(image_user).unwrap_or_else(|| "root".into());
        let container_user = set(container_user).unwrap_or_else(|| image_user.clone());
        let remote_user = set(remote_user).unwrap_or_else(|| container_user.clone());
        Users {
            image_user,
            container_user,
            remote_user,
        }
    }
}

/// The build context, as files relative to its root: generated text, or a Feature's folder.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Context {
    /// Generated files (the Dockerfile, the built-ins, each Feature's variables and wrapper).
    pub(crate) generated: BTreeMap<String, String>,
    /// Each Feature's folder in the context, and where its files are copied from.
    pub(crate) folders: Vec<(String, PathBuf)>,
}

/// The name of the Dockerfile in the context.
pub(crate) const DOCKERFILE: &str = "Dockerfile";

/// Whether `user` is a user as the Features' Dockerfile may hold it: a name or uid, optionally
/// `:group`, of letters, digits, `_`, `.` and `-` (surrounding blanks aside, as `Users::new`
/// trims them). The users are written into the Dockerfile (`USER`, the RUN that finds their
/// home), where a newline, a quote or `$` would change or add instructions.
pub(crate) fn is_user_name(user: &str) -> bool {
    let user = user.trim();
    user.len() <= 256
        && user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-:".contains(c))
}

/// The context that installs `features` (in install order) on top of `base`. A user or a base
/// name that the Dockerfile cannot hold as one word is refused (the policy checked the config's
/// users; the image's own user comes from the image, which the repository may have built).
pub(crate) fn context(
    base: &str,
    features: &[Resolved],
    users: &Users,
    ca: Option<&crate::ca::ExtraCa>,
) -> Result<Context> {
    for (what, user) in [
        ("the base image's user (Config.User)", &users.image_user),
        ("containerUser", &users.container_user),
        ("remoteUser", &users.remote_user),
    ] {
        if !is_user_name(user) {
            return Err(Error::failed(Failure::InvalidName, format!(
                "{what} \"{}\" is not a user name (letters, digits, '_', '.', '-', optionally \":group\"); Features cannot be installed for it",
                crate::visible::escape_controls(user)
            )));
        }
    }
    if base.is_empty() || base.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::failed(
            Failure::InvalidName,
            format!(
                "the base image \"{}\" is not an image name; Features cannot be installed on it",
                crate::visible::escape_controls(base)
            ),
        ));
    }
    let mut generated = BTreeMap::new();
    let mut folders = Vec::new();
    generated.insert(
        BUILTIN_ENV.to_string(),
        format!(
            "_CONTAINER_USER={}\n_REMOTE_USER={}\n",
            shell_quote(&users.container_user),
            shell_quote(&users.remote_user)
        ),
    );
    // The user's CA certificates, trusted by the install scripts (`ca::stage_lines`).
    let trust = match ca {
        Some(ca) => {
            for (path, text) in ca.context_files() {
                generated.insert(path, text.to_string());
            }
            crate::ca::stage_lines()
        }
        None => String::new(),
    };
    let mut docker = format!(
        "FROM {base}\n{trust}USER root\nCOPY {BUILTIN_ENV} {DEST}/\nRUN echo \"_CONTAINER_USER_HOME=$( {})\" >> {DEST}/{BUILTIN_ENV} \\\n && echo \"_REMOTE_USER_HOME=$( {})\" >> {DEST}/{BUILTIN_ENV}\n",
        home_of(&users.container_user),
        home_of(&users.remote_user)
    );
    for (index, feature) in features.iter().enumerate() {
        let folder = folder_name(index, &feature.id);
        generated.insert(format!("{folder}/{FEATURE_ENV}"), options_env(&feature.env));
        generated.insert(format!("{folder}/{WRAPPER}"), wrapper(feature));
        folders.push((folder.clone(), feature.dir.clone()));
        for (name, value) in &feature.metadata.container_env {
            docker.push_str(&format!("ENV {name}=\"{}\"\n", env_value(value)));
        }
        docker.push_str(&format!(
            "COPY --chown=root:root {folder}/ {DEST}/{folder}/\nRUN chmod -R 0755 {DEST}/{folder} \\\n && cd {DEST}/{folder} \\\n && ./{WRAPPER}\n"
        ));
    }
    docker.push_str(&format!("USER {}\n", users.image_user));
    generated.insert(DOCKERFILE.to_string(), docker);
    Ok(Context { generated, folders })
}

/// `<index>-<id>`, the id reduced to `[a-z0-9_.-]`: unique (the index) and readable.
fn folder_name(index: usize, id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    format!("{index}-{clean}")
}

/// A shell command printing the home folder of `user` from the image's passwd (empty if none).
fn home_of(user: &str) -> String {
    let quoted = shell_quote(user);
    format!(
        "(getent passwd {quoted} 2>/dev/null || grep -E \"^{}:\" /etc/passwd || true) | cut -d: -f6",
        user.replace(['"', '\\', '$', '`', '\'', '.', '*', '[', ']', '^'], "")
    )
}

/// The options as `NAME='value'` lines, sourced with `set -a` by the wrapper.
fn options_env(env: &BTreeMap<String, String>) -> String {
    env.iter()
        .map(|(k, v)| format!("{k}={}\n", shell_quote(v)))
        .collect()
}

/// The wrapper: says which Feature installs (and when it fails), exports the built-ins and the
/// options, runs `install.sh` from the Feature's folder.
fn wrapper(feature: &Resolved) -> String {
    let key = shell_quote(&feature.key);
    let version = if feature.version.is_empty() {
        String::new()
    } else {
        format!(" {}", feature.version)
    };
    let about = shell_quote(&format!("({}{version})", feature.id));
    format!(
        r#"#!/bin/sh
set -e
on_exit () {{
	[ $? -eq 0 ] && exit
	echo 'ERROR: Feature '{key}' failed to install!'
}}
trap on_exit EXIT
echo '{MARKER}'{key}' '{about}
set -a
. ../{BUILTIN_ENV}
. ./{FEATURE_ENV}
set +a
chmod +x ./install.sh
./install.sh
"#
    )
}

/// `'text'` for sh, a `'` inside as `'\''`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// A value inside `ENV K="..."`: `"` and `\` escaped; `$` is kept, so `${PATH}` expands as the
/// Feature means (the reference CLI does the same).
fn env_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Which Feature a failed build was installing: the last marker line of its output.
pub(crate) fn failed_feature(output: &[String]) -> Option<String> {
    output.iter().rev().find_map(|line| {
        let rest = line.trim().strip_prefix(MARKER)?;
        // `<key> (<id> <version>)`: the key is what the user wrote.
        Some(rest.rsplit_once(" (").map_or(rest, |(k, _)| k).to_string())
    })
}

impl Context {
    /// Write the context to `dir` (emptied first): the Features' folders copied, then the
    /// generated files. `install.sh` must exist in each Feature's folder.
    pub(crate) fn write(&self, dir: &Path, features: &[Resolved]) -> Result<()> {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        for ((folder, source), feature) in self.folders.iter().zip(features) {
            let install = source.join("install.sh");
            if !install.is_file() {
                return Err(Error::Config {
                    file: source.join("devcontainer-feature.json"),
                    line: None,
                    column: None,
                    property: Some(format!("features.{}", feature.key)),
                    message: format!(
                        "the Feature has no install.sh in {}; a Feature's folder must hold one",
                        source.display()
                    ),
                });
            }
            copy_dir(source, &dir.join(folder))?;
        }
        for (name, text) in &self.generated {
            let path = dir.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
        }
        Ok(())
    }
}

/// Copy a Feature's folder. A link is copied as a link: `features::resolve` let through only
/// links that stay inside the Feature's folder, and the build context's tar carries them as
/// links, so no file outside the folder reaches the build.
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| Error::io(to, e))?;
    let mut entries: Vec<_> = std::fs::read_dir(from)
        .map_err(|e| Error::io(from, e))?
        .collect::<std::io::Result<_>>()
        .map_err(|e| Error::io(from, e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&path, &target)?;
        } else if kind.is_file() {
            std::fs::copy(&path, &target).map_err(|e| Error::io(&path, e))?;
        } else if kind.is_symlink() {
            let link = std::fs::read_link(&path).map_err(|e| Error::io(&path, e))?;
            symlink(&link, &target).map_err(|e| Error::io(&target, e))?;
        } else {
            return Err(Error::Config {
                file: path.clone(),
                line: None,
                column: None,
                property: None,
                message: "a Feature's folder may hold only files, folders and links, not devices or sockets".into(),
            });
        }
    }
    Ok(())
}

/// A deterministic tar of `dir` (names sorted, times 0, owner root, mode kept): the build's
/// context, and the bytes `inputs_digest` hashes.
pub(crate) fn tar_dir(dir: &Path) -> Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    for (rel, path, kind) in files {
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        if kind == Kind::Link {
            let target = std::fs::read_link(&path).map_err(|e| Error::io(&path, e))?;
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_mode(0o777);
            header.set_size(0);
            tar.append_link(&mut header, &rel, &target)
                .map_err(|e| Error::io(&path, e))?;
        } else if kind == Kind::Dir {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            tar.append_data(&mut header, format!("{rel}/"), std::io::empty())
                .map_err(|e| Error::io(&path, e))?;
        } else {
            let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            let mode = file_mode(&path);
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(mode);
            header.set_size(bytes.len() as u64);
            tar.append_data(&mut header, &rel, bytes.as_slice())
                .map_err(|e| Error::io(&path, e))?;
        }
    }
    tar.into_inner().map_err(|e| Error::io(dir, e))
}

#[cfg(unix)]
fn symlink(link: &Path, at: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(link, at)
}

#[cfg(not(unix))]
fn symlink(_: &Path, at: &Path) -> std::io::Result<()> {
    Err(std::io::Error::other(format!(
        "{}: links in Features need a Unix host",
        at.display()
    )))
}

#[cfg(unix)]
fn file_mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).map_or(0o644, |m| m.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
fn file_mode(_: &Path) -> u32 {
    0o644
}

/// What `collect` found at a path (links are not followed).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    File,
    Dir,
    Link,
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf, Kind)>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .collect::<std::io::Result<_>>()
        .map_err(|e| Error::io(dir, e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .map(crate::paths::slash_path)
            .unwrap_or_default();
        let kind = match entry.file_type() {
            Ok(t) if t.is_symlink() => Kind::Link,
            Ok(t) if t.is_dir() => Kind::Dir,
            _ => Kind::File,
        };
        out.push((rel, path.clone(), kind));
        if kind == Kind::Dir {
            collect(root, &path, out)?;
        }
    }
    Ok(())
}

/// What the Features image is built from: the base image's id, the context's bytes and the
/// image's label. Equal digests mean the tagged image is already this build's result.
pub(crate) fn inputs_digest(base_id: &str, tar: &[u8], label: &str) -> String {
    let mut hasher = Sha256::new();
    for part in [base_id.as_bytes(), tar, label.as_bytes()] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    format!("sha256:{}", hex::encode(hasher.finalize()))
}

/// A Feature's image metadata entry, as the reference CLI's `pickFeatureProperties`: its
/// requests (`init`, `privileged`, `capAdd`, `securityOpt`, `mounts`), `entrypoint`, lifecycle
/// hooks and `customizations`, with `id` the user's reference. Not its `containerEnv`: that is
/// the image's `ENV` (written by `context`), where `${PATH}` expands; as a container variable it
/// would be set literally.
pub(crate) fn feature_entry(feature: &Resolved) -> Entry {
    let m = &feature.metadata;
    Entry {
        id: Some(feature.key.clone()),
        init: m.init,
        privileged: m.privileged,
        cap_add: m.cap_add.clone(),
        security_opt: m.security_opt.clone(),
        entrypoint: m.entrypoint.clone(),
        mounts: m.mounts.clone(),
        customizations: m.customizations.clone(),
        on_create_command: m.on_create_command.clone(),
        update_content_command: m.update_content_command.clone(),
        post_create_command: m.post_create_command.clone(),
        post_start_command: m.post_start_command.clone(),
        post_attach_command: m.post_attach_command.clone(),
        ..Entry::default()
    }
}

/// The image's `devcontainer.metadata` label: the base image's entries (kept as they were,
/// unknown properties too), then one per Feature, with `id` the user's reference.
pub(crate) fn metadata_label(base_label: Option<&str>, features: &[Resolved]) -> String {
    let mut entries: Vec<serde_json::Value> =
        match base_label.and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok()) {
            Some(serde_json::Value::Array(values)) => values,
            Some(object @ serde_json::Value::Object(_)) => vec![object],
            _ => Vec::new(),
        };
    for feature in features {
        entries.push(serde_json::to_value(feature_entry(feature)).unwrap_or_default());
    }
    serde_json::Value::Array(entries).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feature(key: &str, dir: &Path) -> Resolved {
        Resolved {
            key: key.into(),
            id: "hello".into(),
            version: "1.0.0".into(),
            dir: dir.to_path_buf(),
            env: BTreeMap::from([
                ("GREETING".to_string(), "it's me".to_string()),
                ("VERSION".to_string(), "latest".to_string()),
            ]),
            metadata: Entry {
                container_env: BTreeMap::from([(
                    "PATH".to_string(),
                    "/opt/hello/bin:${PATH}".to_string(),
                )]),
                privileged: Some(true),
                ..Entry::default()
            },
            digest: "sha256:00".into(),
        }
    }

    #[test]
    fn users_fall_back_as_the_reference_cli() {
        let u = Users::new(None, None, None);
        assert_eq!(
            (
                u.image_user.as_str(),
                u.container_user.as_str(),
                u.remote_user.as_str()
            ),
            ("root", "root", "root")
        );
        let u = Users::new(Some("node"), None, Some("dev"));
        assert_eq!(
            (
                u.image_user.as_str(),
                u.container_user.as_str(),
                u.remote_user.as_str()
            ),
            ("node", "node", "dev")
        );
        let u = Users::new(Some(""), Some("app"), None);
        assert_eq!(
            (u.image_user.as_str(), u.remote_user.as_str()),
            ("root", "app")
        );
    }

    #[test]
    fn one_layer_per_feature_in_order_with_its_env_first() {
        let dir = Path::new("/cache/hello");
        let features = [feature("./hello", dir), feature("ghcr.io/x/y/other:1", dir)];
        let users = Users::new(Some("node"), None, Some("dev"));
        let ctx = context("base:1", &features, &users, None).unwrap();
        let docker = &ctx.generated[DOCKERFILE];
        assert!(docker.starts_with("FROM base:1\nUSER root\n"), "{docker}");
        assert!(docker.ends_with("USER node\n"), "{docker}");
        let first = docker.find("COPY --chown=root:root 0-hello/").unwrap();
        let second = docker.find("COPY --chown=root:root 1-hello/").unwrap();
        let env = docker.find("ENV PATH=\"/opt/hello/bin:${PATH}\"").unwrap();
        assert!(env < first && first < second, "{docker}");
        assert_eq!(docker.matches("RUN chmod").count(), 2);
        assert_eq!(
            ctx.folders,
            vec![
                ("0-hello".to_string(), dir.to_path_buf()),
                ("1-hello".to_string(), dir.to_path_buf())
            ]
        );
        assert_eq!(
            ctx.generated["0-hello/devcontainer-features.env"],
            "GREETING='it'\\''s me'\nVERSION='latest'\n"
        );
        assert_eq!(
            ctx.generated[BUILTIN_ENV],
            "_CONTAINER_USER='node'\n_REMOTE_USER='dev'\n"
        );
        assert!(docker.contains("_REMOTE_USER_HOME=$( (getent passwd 'dev'"));
        let wrapper = &ctx.generated["1-hello/devcontainer-features-install.sh"];
        assert!(
            wrapper.contains(
                "echo 'yolo: installing Feature ''ghcr.io/x/y/other:1'' ''(hello 1.0.0)'"
            ),
            "{wrapper}"
        );
        assert!(wrapper
            .contains(". ../devcontainer-features.builtin.env\n. ./devcontainer-features.env\n"));
    }

    #[test]
    fn a_user_or_base_cannot_add_dockerfile_lines() {
        for user in [
            "node",
            "1000",
            "1000:1000",
            "vscode:staff",
            " dev ",
            "a.b-c_d",
        ] {
            assert!(is_user_name(user), "{user}");
        }
        let dir = Path::new("/cache/hello");
        let features = [feature("./hello", dir)];
        for user in [
            "root\nADD http://127.0.0.1:1/s /s",
            "root\rADD x",
            "a' b",
            "a\"b",
            "$(id)",
            "a\\",
            "a b",
        ] {
            assert!(!is_user_name(user), "{user:?}");
            for users in [
                Users::new(Some(user), None, None),
                Users::new(None, Some(user), None),
                Users::new(None, None, Some(user)),
            ] {
                let err = context("base:1", &features, &users, None).unwrap_err();
                assert!(err.to_string().contains("is not a user name"), "{err}");
                assert!(
                    matches!(
                        err,
                        Error::Failed {
                            what: Failure::InvalidName,
                            ..
                        }
                    ),
                    "{err:?}"
                );
            }
        }
        let users = Users::new(None, None, None);
        let err = context(
            "base:1\nADD http://127.0.0.1:1/s /s",
            &features,
            &users,
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("is not an image name"), "{err}");
        assert!(
            matches!(
                err,
                Error::Failed {
                    what: Failure::InvalidName,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn the_same_features_give_the_same_context() {
        let dir = Path::new("/cache/hello");
        let users = Users::new(None, None, None);
        let a = context("base:1", &[feature("./hello", dir)], &users, None).unwrap();
        let b = context("base:1", &[feature("./hello", dir)], &users, None).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn a_written_context_tars_the_same_twice_and_changes_with_a_file() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("install.sh"), "#!/bin/sh\necho hi\n").unwrap();
        std::fs::create_dir(src.path().join("lib")).unwrap();
        std::fs::write(src.path().join("lib/a"), "a").unwrap();
        let features = [feature("./hello", src.path())];
        let ctx = context("base:1", &features, &Users::new(None, None, None), None).unwrap();
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("ctx");
        ctx.write(&dir, &features).unwrap();
        assert!(dir.join("0-hello/lib/a").is_file());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("lib/a", src.path().join("a-link")).unwrap();
            ctx.write(&dir, &features).unwrap();
            let copied = dir.join("0-hello/a-link");
            assert_eq!(std::fs::read_link(&copied).unwrap(), Path::new("lib/a"));
            let tar = tar_dir(&dir).unwrap();
            let mut archive = tar::Archive::new(tar.as_slice());
            let link = archive
                .entries()
                .unwrap()
                .map(|e| e.unwrap())
                .find(|e| e.path().unwrap() == Path::new("0-hello/a-link"))
                .unwrap();
            assert_eq!(link.header().entry_type(), tar::EntryType::Symlink);
            std::fs::remove_file(src.path().join("a-link")).unwrap();
            ctx.write(&dir, &features).unwrap();
        }
        assert!(dir
            .join("0-hello/devcontainer-features-install.sh")
            .is_file());
        let one = tar_dir(&dir).unwrap();
        ctx.write(&dir, &features).unwrap();
        let two = tar_dir(&dir).unwrap();
        assert_eq!(
            inputs_digest("id", &one, "[]"),
            inputs_digest("id", &two, "[]")
        );
        assert_ne!(
            inputs_digest("id", &one, "[]"),
            inputs_digest("id2", &one, "[]")
        );
        std::fs::write(src.path().join("lib/a"), "b").unwrap();
        ctx.write(&dir, &features).unwrap();
        assert_ne!(one, tar_dir(&dir).unwrap());
    }

    #[test]
    fn a_feature_without_install_sh_is_named() {
        let src = tempfile::tempdir().unwrap();
        let features = [feature("./hello", src.path())];
        let ctx = context("base:1", &features, &Users::new(None, None, None), None).unwrap();
        let out = tempfile::tempdir().unwrap();
        let err = ctx.write(&out.path().join("c"), &features).unwrap_err();
        assert!(err.to_string().contains("no install.sh"), "{err}");
    }

    #[test]
    fn the_failed_feature_is_the_last_marker() {
        let lines = vec![
            "Step 3/9".to_string(),
            "yolo: installing Feature ./a (a 1)".to_string(),
            "yolo: installing Feature ghcr.io/b:1 (b)".to_string(),
            "ERROR: boom".to_string(),
        ];
        assert_eq!(failed_feature(&lines).as_deref(), Some("ghcr.io/b:1"));
        assert_eq!(failed_feature(&lines[..1]), None);
    }

    #[test]
    fn the_label_keeps_the_base_entries_and_adds_one_per_feature() {
        let dir = Path::new("/x");
        let label = metadata_label(
            Some(r#"[{"remoteUser": "node", "vendorThing": 1}]"#),
            &[feature("./hello", dir)],
        );
        let value: serde_json::Value = serde_json::from_str(&label).unwrap();
        assert_eq!(value[0]["vendorThing"], 1);
        assert_eq!(value[1]["id"], "./hello");
        assert_eq!(value[1]["privileged"], true);
        // containerEnv is the image's ENV, not a container variable (`${PATH}` would stay as is).
        assert!(value[1].get("containerEnv").is_none(), "{value}");
        let label = metadata_label(Some("{\"remoteUser\": \"a\"}"), &[]);
        assert_eq!(label, r#"[{"remoteUser":"a"}]"#);
        assert_eq!(metadata_label(Some("nonsense"), &[]), "[]");
    }
}
