//! `--env-file` of runArgs: the file is read by yolo on the host, after the policy, and its
//! variables join `containerEnv` under what the config sets itself (`containerEnv`, `-e`), as
//! `docker run` lets `-e` win over `--env-file`.
//!
//! The policy checked the path as written; here its real path (symlinks resolved: the agent can
//! plant one) must still be in the repository, or covered by a `host-mount` grant. The format
//! is docker's: `NAME=VALUE` per line, `#` comments and blank lines skipped, the value taken as
//! written (no quotes removed). A bare `NAME` would copy the host's variable: skipped with a
//! note, as yolo does not pass host variables unless `pass_env` says so. Hand-written: a
//! dozen lines, and the dotenv crates unquote and expand, which docker does not.

use crate::error::{Error, Result};
use crate::policy;
use crate::run_spec::RunSpec;
use std::path::{Path, PathBuf};

pub(crate) fn apply(spec: &mut RunSpec, grants: &policy::Grants) -> Result<()> {
    if spec.env_files.is_empty() {
        return Ok(());
    }
    let roots: Vec<PathBuf> = [
        Some(spec.workspace.clone()),
        crate::paths::git_root(&spec.workspace),
    ]
    .into_iter()
    .flatten()
    .filter_map(|p| p.canonicalize().ok())
    .collect();
    let mut read = Vec::new();
    for (property, path) in &spec.env_files {
        let config_error = |message: String| Error::Config {
            file: spec.config_file.clone(),
            line: None,
            column: None,
            property: Some(property.clone()),
            message,
        };
        let real = path
            .canonicalize()
            .map_err(|e| config_error(format!("--env-file {}: {e}", path.display())))?;
        if !roots.iter().any(|r| real.starts_with(r)) && !grants.host_mount_covers(&real) {
            return Err(Error::Refused {
                file: spec.config_file.clone(),
                property: property.clone(),
                value: format!("--env-file {} (really {})", path.display(), real.display()),
                reason: "it leads outside the repository (through a symlink), and yolo would copy that host file into the container".into(),
                grant: format!("--grant host-mount={} (after checking the link is yours)", real.display()),
            });
        }
        let text = crate::digest::read_to_string(&real).map_err(|e| Error::io(&real, e))?;
        read.push((real, text));
    }
    for (real, text) in read {
        for (name, value) in parse(&text, &real, &mut spec.notes) {
            spec.container_env.entry(name).or_insert(value);
        }
    }
    policy::seal(spec);
    Ok(())
}

fn parse(text: &str, path: &Path, notes: &mut Vec<String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.split_once('=') {
            Some((name, value)) if !name.is_empty() => out.push((name.to_string(), value.to_string())),
            _ => notes.push(format!(
                "{}:{}: \"{}\" has no value; yolo does not copy host variables into the container (skipped)",
                path.display(),
                i + 1,
                crate::visible::escape_controls(line.trim_end())
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_env_file_format() {
        let mut notes = Vec::new();
        let vars = parse(
            "# comment\n\nA=1\n  B=two words\nC=\"quoted\"\nHOME\nD=x=y\n",
            Path::new("/r/.env"),
            &mut notes,
        );
        let want: Vec<(String, String)> = [
            ("A", "1"),
            ("B", "two words"),
            ("C", "\"quoted\""),
            ("D", "x=y"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(vars, want);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with("/r/.env:6: \"HOME\" has no value"),
            "{notes:?}"
        );
    }
}
