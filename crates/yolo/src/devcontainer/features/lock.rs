//! `devcontainer-lock.json`, as the reference CLI reads and writes it (`lockfile.ts`): next to
//! the config (`.devcontainer-lock.json` for a `.devcontainer.json`), one entry per OCI or
//! tarball Feature (dependencies included; local Features have none), keyed as referenced,
//! sorted by key, `{version, resolved, integrity, dependsOn?}`, two-space JSON with a trailing
//! newline, written only when its content changes. An empty file asks for one to be written.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How resolution uses the lock file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum LockMode {
    /// Read it (pin digests, verify integrity) and write it when it changed: the reference
    /// CLI's default.
    #[default]
    Update,
    /// Read it; fail when it is missing or would change (`--frozen-lockfile`).
    Frozen,
    /// Neither read nor write it (`--no-lockfile`).
    Ignore,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Lockfile {
    pub(crate) features: BTreeMap<String, LockEntry>,
}

/// Field order is the file's key order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LockEntry {
    /// Absent when the Feature has none (as `JSON.stringify` drops `undefined`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<String>,
    pub(crate) resolved: String,
    pub(crate) integrity: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) depends_on: Option<Vec<String>>,
}

/// Where the lock file of `config_file` lives.
pub(crate) fn path_for(config_file: &Path) -> PathBuf {
    let name = config_file
        .file_name()
        .map(|n| n.to_string_lossy().starts_with('.'))
        .unwrap_or(false);
    let file = if name {
        ".devcontainer-lock.json"
    } else {
        "devcontainer-lock.json"
    };
    config_file
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join(file)
}

/// Read the lock file; `Ok(None)` when there is none or it is empty.
pub(crate) fn read(path: &Path) -> Result<Option<Lockfile>, String> {
    let text = match crate::digest::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str(&text).map(Some).map_err(|e| {
        format!("it is not a valid lock file ({e}); delete it and yolo writes a new one")
    })
}

/// The file's text for `lock`.
pub(crate) fn render(lock: &Lockfile) -> String {
    // BTreeMap keys sort by code point; the reference CLI sorts by localeCompare.
    let mut keys: Vec<&String> = lock.features.keys().collect();
    keys.sort_by(|a, b| super::order::locale_compare(a, b));
    let mut text = String::from("{\n  \"features\": {");
    if keys.is_empty() {
        text.push('}');
    }
    for (i, key) in keys.iter().enumerate() {
        let entry = serde_json::to_string_pretty(&lock.features[*key]).unwrap_or_default();
        let entry = entry.replace('\n', "\n    ");
        let sep = if i + 1 < keys.len() { "," } else { "" };
        text.push_str(&format!(
            "\n    {}: {entry}{sep}",
            serde_json::Value::String((*key).clone())
        ));
    }
    if !keys.is_empty() {
        text.push_str("\n  }");
    }
    text.push_str("\n}\n");
    text
}

/// Write `lock` to `path` unless the file already says the same (compared after normalizing
/// it, as the reference CLI does). In `Frozen` mode a difference is an error instead.
/// Returns whether it wrote.
pub(crate) fn write(path: &Path, lock: &Lockfile, mode: LockMode) -> Result<bool, String> {
    if mode == LockMode::Ignore {
        return Ok(false);
    }
    let new = render(lock);
    // The lock file can lie where the agent writes (beside a root `.devcontainer.json`): a link
    // there would have yolo read, or replace, a file the agent chose.
    if path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err("it is a symbolic link; yolo does not follow one there (delete it)".into());
    }
    let old = match crate::digest::read_to_string(path) {
        Ok(old) => Some(old),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    let same = old
        .as_deref()
        .is_some_and(|old| normalized(old).as_deref() == Some(&new));
    if same {
        return Ok(false);
    }
    if mode == LockMode::Frozen {
        return Err(match old {
            None => "the lock file does not exist, and --frozen-lockfile forbids writing it".into(),
            Some(_) => "the lock file does not match the Features resolved, and \
                        --frozen-lockfile forbids updating it"
                .into(),
        });
    }
    // A new file of a name nobody could guess, made here and never through a link
    // (`create_new`: O_EXCL, which does not follow one), then renamed over the lock file.
    let tmp = path.with_extension(format!("json.yolo-tmp-{}", uuid::Uuid::new_v4().simple()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut file| {
            use std::io::Write;
            file.write_all(new.as_bytes())
        });
    written
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write it: {e}")
        })?;
    Ok(true)
}

/// The old file as `render` would write it, when it holds exactly a lock file's fields.
fn normalized(old: &str) -> Option<String> {
    let lock: Lockfile = serde_json::from_str(old).ok()?;
    let raw: serde_json::Value = serde_json::from_str(old).ok()?;
    let rendered = render(&lock);
    let again: serde_json::Value = serde_json::from_str(&rendered).ok()?;
    (raw == again).then_some(rendered)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(v: &str, deps: Option<Vec<&str>>) -> LockEntry {
        LockEntry {
            version: Some(v.into()),
            resolved: format!("ghcr.io/x/y@sha256:{v}"),
            integrity: format!("sha256:{v}"),
            depends_on: deps.map(|d| d.into_iter().map(String::from).collect()),
        }
    }

    #[test]
    fn renders_like_json_stringify() {
        let lock = Lockfile {
            features: BTreeMap::from([
                ("ghcr.io/x/b:1".to_string(), entry("2", None)),
                (
                    "ghcr.io/x/a:1".to_string(),
                    entry("1", Some(vec!["ghcr.io/x/b:1"])),
                ),
            ]),
        };
        let expected = r#"{
  "features": {
    "ghcr.io/x/a:1": {
      "version": "1",
      "resolved": "ghcr.io/x/y@sha256:1",
      "integrity": "sha256:1",
      "dependsOn": [
        "ghcr.io/x/b:1"
      ]
    },
    "ghcr.io/x/b:1": {
      "version": "2",
      "resolved": "ghcr.io/x/y@sha256:2",
      "integrity": "sha256:2"
    }
  }
}
"#;
        assert_eq!(render(&lock), expected);
        assert_eq!(render(&Lockfile::default()), "{\n  \"features\": {}\n}\n");
    }

    #[test]
    fn sorts_keys_as_locale_compare() {
        let lock = Lockfile {
            features: BTreeMap::from([
                ("ghcr.io/x/B:1".to_string(), entry("2", None)),
                ("ghcr.io/x/a:1".to_string(), entry("1", None)),
            ]),
        };
        let text = render(&lock);
        assert!(
            text.find("x/a:1").unwrap() < text.find("x/B:1").unwrap(),
            "{text}"
        );
    }

    /// Root in the agent plants links where yolo writes the lock (beside a root
    /// `.devcontainer.json`): the old temporary name, and the lock file itself. Neither the
    /// file they point at nor anything outside changes.
    #[test]
    fn links_planted_at_the_lock_file_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let path = path_for(&dir.path().join(".devcontainer.json"));
        let lock = Lockfile {
            features: BTreeMap::from([("ghcr.io/x/a:1".to_string(), entry("1", None))]),
        };
        std::os::unix::fs::symlink(&victim, path.with_extension("json.yolo-tmp")).unwrap();
        assert!(write(&path, &lock, LockMode::Update).unwrap());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!path.symlink_metadata().unwrap().file_type().is_symlink());
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        assert!(write(&path, &lock, LockMode::Update)
            .unwrap_err()
            .contains("symbolic link"));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }

    #[test]
    fn writes_only_on_change_and_frozen_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("devcontainer.json");
        let path = path_for(&config);
        assert_eq!(path, dir.path().join("devcontainer-lock.json"));
        assert_eq!(
            path_for(&dir.path().join(".devcontainer.json")),
            dir.path().join(".devcontainer-lock.json")
        );
        let lock = Lockfile {
            features: BTreeMap::from([("ghcr.io/x/a:1".to_string(), entry("1", None))]),
        };
        assert!(write(&path, &lock, LockMode::Frozen)
            .unwrap_err()
            .contains("does not exist"));
        assert!(write(&path, &lock, LockMode::Update).unwrap());
        assert!(!write(&path, &lock, LockMode::Update).unwrap());
        assert!(!write(&path, &lock, LockMode::Frozen).unwrap());
        assert_eq!(read(&path).unwrap(), Some(lock.clone()));
        // Cosmetic differences (indentation) are not a change.
        let compact = serde_json::to_string(&lock).unwrap();
        std::fs::write(&path, &compact).unwrap();
        assert!(!write(&path, &lock, LockMode::Update).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), compact);
        let mut changed = lock.clone();
        changed
            .features
            .insert("ghcr.io/x/c:1".into(), entry("3", None));
        assert!(write(&path, &changed, LockMode::Frozen)
            .unwrap_err()
            .contains("does not match"));
        assert!(write(&path, &changed, LockMode::Update).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), render(&changed));
        // An empty file is no lock (and a request for one).
        std::fs::write(&path, "").unwrap();
        assert_eq!(read(&path).unwrap(), None);
        assert!(write(&path, &lock, LockMode::Ignore).is_ok_and(|w| !w));
    }
}
