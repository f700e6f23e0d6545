//! The names yolo gives what it creates for a workspace: the agent container, the image it
//! builds, the agent state volumes. Derived from the workspace folder and the
//! `${devcontainerId}`, so the same workspace finds its objects again. Pure.

use std::path::Path;

/// `yolo-<basename>-<first 8 of the devcontainer id>`.
pub(crate) fn container_name(workspace: &Path, devcontainer_id: &str) -> String {
    let id = sanitize_for_tag(devcontainer_id, 8);
    format!("yolo-{}-{id}", sanitize(&basename(workspace), 30))
}

/// `yolo-<basename>-<first 12 of the devcontainer id>:latest`.
pub(crate) fn image_tag(workspace: &Path, devcontainer_id: &str) -> String {
    let id = sanitize_for_tag(devcontainer_id, 12);
    format!(
        "yolo-{}-{id}:latest",
        sanitize_for_tag(&basename(workspace), 30)
    )
}

/// The network yolo creates (and `down --remove` deletes) for a project container.
pub(crate) fn own_network(container_name: &str) -> String {
    format!("{container_name}-net")
}

/// The Compose project name of a project container, exactly as Compose will use it: the
/// container's name with what Compose drops dropped, so the networks, containers and images
/// Compose names after the project (`<project>_default`, `<project>_db_1`) are found under it.
/// docker-compose 1.29 (`get_project_name`) lowercases and removes every character but
/// `[-_a-z0-9]`; Compose v2 (compose-go `NormalizeProjectName`) does the same and trims leading
/// `-`/`_`, and refuses a `--project-name` that is not `^[a-z0-9][a-z0-9_-]*$`: this name is
/// one both take unchanged. Without it a workspace folder like `My.App` gave yolo the project
/// `yolo-my.app-…` while Compose made `yolo-myapp-…`.
pub(crate) fn compose_project(container_name: &str) -> String {
    let kept: String = container_name
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_".contains(*c))
        .collect();
    let kept = kept.trim_start_matches(['-', '_']);
    if kept.is_empty() {
        "workspace".into()
    } else {
        kept.into()
    }
}

/// Named volume holding an agent's state for a workspace: `yolo-<agent>-<devcontainerId>`.
pub(crate) fn state_volume(agent: &str, devcontainer_id: &str) -> String {
    format!("yolo-{agent}-{devcontainer_id}")
}

/// Lowercase `[a-z0-9_.-]`, other characters as `-`, at most `max` characters.
fn sanitize(text: &str, max: usize) -> String {
    let clean: String = text
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(max)
        .collect();
    if clean.is_empty() {
        "workspace".into()
    } else {
        clean
    }
}

/// Image repository names are stricter: alphanumerics separated by single `-`.
fn sanitize_for_tag(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars().map(|c| c.to_ascii_lowercase()) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let out: String = out.chars().take(max).collect();
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "workspace".into()
    } else {
        out.into()
    }
}

fn basename(workspace: &Path) -> String {
    workspace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdef";

    #[test]
    fn names_are_sanitized() {
        assert_eq!(
            container_name(Path::new("/x/Héllo World!"), "AbCdEfGhIj"),
            "yolo-h-llo-world--abcdefgh"
        );
        let long = format!("/x/{}", "a".repeat(50));
        assert_eq!(
            container_name(Path::new(&long), "12"),
            format!("yolo-{}-12", "a".repeat(30))
        );
        assert_eq!(container_name(Path::new("/"), "1"), "yolo-workspace-1");
        assert_eq!(
            image_tag(Path::new("/x/My..Repo_"), ID),
            "yolo-my-repo-0123456789ab:latest"
        );
    }

    /// What docker-compose 1.29 and Compose v2 make of the name, checked by the rule both
    /// follow (`[a-z0-9][a-z0-9_-]*`, unchanged by either's normalisation).
    #[test]
    fn the_compose_project_is_the_name_compose_keeps() {
        let name = container_name(Path::new("/x/My.App"), "AbCdEfGhIj");
        assert_eq!(name, "yolo-my.app-abcdefgh");
        assert_eq!(compose_project(&name), "yolo-myapp-abcdefgh");
        assert_eq!(compose_project("yolo-a_b-1"), "yolo-a_b-1");
        assert_eq!(compose_project("_.Ex.Com"), "excom");
        assert_eq!(compose_project("..."), "workspace");
        for folder in ["/x/example.com", "/x/Héllo World!", "/x/a__b", "/x/ÄÖ"] {
            let project = compose_project(&container_name(Path::new(folder), "1"));
            let v1: String = project
                .chars()
                .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_".contains(*c))
                .collect();
            assert_eq!(v1, project, "{folder}");
            assert!(project.starts_with(|c: char| c.is_ascii_alphanumeric()));
        }
    }

    #[test]
    fn state_volume_name() {
        assert_eq!(state_volume("claude", "abc123"), "yolo-claude-abc123");
    }
}
