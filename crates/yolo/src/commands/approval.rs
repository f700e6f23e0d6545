//! The repository's `.devcontainer/` can be edited by the agent through the workspace mount.
//! When it changed since the user last approved it, show the change and ask again; a
//! non-interactive run refuses unless the user granted `config-change`.

use crate::error::{Error, Result};
use crate::project::Project;
use crate::state::WorkspaceState;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::Path;

const MAX_FILE: u64 = 256 * 1024;

/// The config folder's files: `.devcontainer/` (recursively) when the config lives there,
/// otherwise the config file alone.
pub(crate) fn snapshot(config_file: &Path, workspace: &Path) -> BTreeMap<String, String> {
    let dir = config_file.parent().unwrap_or(workspace);
    let mut files = BTreeMap::new();
    if dir == workspace {
        add(&mut files, config_file, workspace);
        return files;
    }
    let walker = ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .follow_links(false)
        .build();
    for entry in walker.flatten() {
        let kind = entry.file_type();
        if kind.is_some_and(|t| t.is_symlink()) {
            // A link is part of the config too: where it leads is what Docker will read.
            let target = std::fs::read_link(entry.path()).unwrap_or_default();
            let rel = entry.path().strip_prefix(workspace).unwrap_or(entry.path());
            files.insert(
                rel.display().to_string(),
                format!("symlink -> {}", target.display()),
            );
        } else if kind.is_some_and(|t| t.is_file()) {
            add(&mut files, entry.path(), workspace);
        }
    }
    files
}

fn add(files: &mut BTreeMap<String, String>, path: &Path, workspace: &Path) {
    let rel = path
        .strip_prefix(workspace)
        .unwrap_or(path)
        .display()
        .to_string();
    files.insert(rel, snapshot_text(&std::fs::read(path).unwrap_or_default()));
}

/// What the snapshot keeps of a file: its text, or for a large one its size and content hash, so
/// an edit that keeps the size is still a change (a size alone let a same-size edit through).
fn snapshot_text(bytes: &[u8]) -> String {
    if bytes.len() as u64 > MAX_FILE {
        use sha2::{Digest, Sha256};
        format!(
            "<{} bytes, sha256 {}>",
            bytes.len(),
            hex::encode(Sha256::digest(bytes))
        )
    } else {
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// A readable diff between the approved and the current snapshot, with the repository's control
/// characters shown as escapes (`visible`), so the diff you approve is the change.
pub(crate) fn diff(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let names: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for name in names {
        let (a, b) = (old.get(name), new.get(name));
        if a == b {
            continue;
        }
        let (a, b) = (
            a.map(String::as_str).unwrap_or(""),
            b.map(String::as_str).unwrap_or(""),
        );
        let diff = similar::TextDiff::from_lines(a, b);
        out.push_str(
            &diff
                .unified_diff()
                .context_radius(2)
                .header(&format!("a/{name}"), &format!("b/{name}"))
                .to_string(),
        );
    }
    crate::visible::escape_controls(&out)
}

/// Check (and record) approval. First use records the current files as approved: the policy
/// has already refused anything dangerous, and there is nothing earlier to compare with.
pub(crate) fn check(project: &Project, state: &mut WorkspaceState) -> Result<()> {
    let spec = &project.spec;
    let current = snapshot(&spec.config_file, &spec.workspace);
    let Some(approved) = &state.approved else {
        state.approved = Some(current);
        return Ok(());
    };
    if *approved == current {
        return Ok(());
    }
    let change = diff(approved, &current);
    if !project.settings.accept_config {
        if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
            return Err(Error::NotApproved(format!(
                "the repository's dev container config changed since you last approved it:\n{change}\nyolo refuses to continue without your approval: review the change, then run again with --accept-config (or answer yes in a terminal)"
            )));
        }
        eprintln!("The dev container config changed since you last approved it:\n{change}");
        let yes = dialoguer::Confirm::new()
            .with_prompt("Accept this change?")
            .default(false)
            .interact()
            .map_err(|e| Error::NotApproved(format!("no answer ({e}); nothing was started")))?;
        if !yes {
            return Err(Error::NotApproved(
                "change not accepted; nothing was started".into(),
            ));
        }
    }
    state.approved = Some(current);
    Ok(())
}

/// Proof that `initializeCommand` may run: only [`confirm_host_command`] makes one, and
/// `hooks::initialize` will not run the command without it.
pub(crate) struct HostCommandApproval(());

/// Right before `initializeCommand` would run on the host: go on when the user trusts host
/// commands, else ask in a terminal; refuse (77) when nobody can be asked or the answer is no.
/// Asked only on the path that runs it (a new start), never when a running container is reused.
pub(crate) fn confirm_host_command(project: &Project) -> Result<HostCommandApproval> {
    let Some(command) = &project.spec.initialize_command else {
        return Ok(HostCommandApproval(()));
    };
    if project.settings.trust_host_commands {
        return Ok(HostCommandApproval(()));
    }
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        let shown = command
            .commands("initializeCommand")
            .into_iter()
            .map(|(_, argv)| argv.join(" "))
            .collect::<Vec<_>>()
            .join("; ");
        return Err(Error::Refused {
            file: project.spec.config_file.clone(),
            property: "initializeCommand".into(),
            value: format!("`{shown}`"),
            reason: "it runs on your host, outside the container".into(),
            grant: format!(
                "--trust-host-commands, or trust_host_commands = true in {}",
                crate::user_config::UserConfig::path().display()
            ),
        });
    }
    let shown = serde_json::to_string(command).unwrap_or_default();
    eprintln!(
        "The repository wants to run this on YOUR machine (not in the container):\n  {shown}"
    );
    let yes = dialoguer::Confirm::new()
        .with_prompt("Run it on the host?")
        .default(false)
        .interact()
        .map_err(|e| Error::NotApproved(format!("no answer ({e}); nothing was started")))?;
    if !yes {
        return Err(Error::NotApproved(
            "initializeCommand not approved; nothing was started".into(),
        ));
    }
    Ok(HostCommandApproval(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_file_changes_with_its_content_not_only_its_size() {
        let big = vec![b'a'; MAX_FILE as usize + 1];
        let mut edited = big.clone();
        edited[10] = b'b';
        assert_ne!(snapshot_text(&big), snapshot_text(&edited));
        assert!(snapshot_text(&big).starts_with(&format!("<{} bytes, sha256 ", big.len())));
        assert_eq!(snapshot_text(b"small"), "small");
    }
}
