//! `yolo init`: write a `.devcontainer/` for an agent from `templates/init/`.

use crate::cli::Target;
use crate::error::{Error, Result};
use std::path::PathBuf;

const DEVCONTAINER: &str = include_str!("../../../../templates/init/devcontainer.json");
const DOCKERFILE: &str = include_str!("../../../../templates/init/Dockerfile");

/// How each agent is installed in the template image: (apt packages, RUN line, presets).
fn recipe(agent: &str) -> Option<(&'static str, &'static str, &'static str)> {
    Some(match agent {
        "claude" => ("nodejs npm", "RUN npm install -g @anthropic-ai/claude-code", r#""npm", "github""#),
        "codex" => ("nodejs npm", "RUN npm install -g @openai/codex", r#""npm", "github""#),
        "gemini" => ("nodejs npm", "RUN npm install -g @google/gemini-cli", r#""npm", "github""#),
        "opencode" => ("nodejs npm", "RUN npm install -g opencode-ai", r#""npm", "github""#),
        "aider" => ("python3 python3-venv", "RUN python3 -m venv /opt/aider && /opt/aider/bin/pip install aider-chat && ln -s /opt/aider/bin/aider /usr/local/bin/aider", r#""pypi", "github""#),
        _ => return None,
    })
}

pub fn execute(target: &Target, agent: &str, force: bool) -> Result<i32> {
    let (packages, install, presets) = recipe(agent).ok_or_else(|| {
        Error::Usage(format!("no template for agent {agent:?}; templates exist for claude, codex, gemini, aider, opencode"))
    })?;
    let workspace = target
        .workspace
        .clone()
        .unwrap_or_else(|| PathBuf::from("."));
    let dir = workspace.join(".devcontainer");
    let files = [
        (
            dir.join("devcontainer.json"),
            fill(DEVCONTAINER, agent, packages, install, presets),
        ),
        (
            dir.join("Dockerfile"),
            fill(DOCKERFILE, agent, packages, install, presets),
        ),
    ];
    if !force {
        if let Some((path, _)) = files.iter().find(|(p, _)| p.exists()) {
            return Err(Error::Exists(path.clone()));
        }
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    for (path, text) in &files {
        std::fs::write(path, text).map_err(|e| Error::io(path, e))?;
        eprintln!("wrote {}", path.display());
    }
    eprintln!("next: `yolo run {agent}`");
    Ok(0)
}

fn fill(template: &str, agent: &str, packages: &str, install: &str, presets: &str) -> String {
    template
        .replace("{{AGENT}}", agent)
        .replace("{{PACKAGES}}", packages)
        .replace("{{INSTALL}}", install)
        .replace("{{PRESETS}}", presets)
}
