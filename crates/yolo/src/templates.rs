//! What `yolo init` writes: a `.devcontainer/` for an agent from `templates/init/`, with the
//! toolchains the repository shows it needs (Cargo.toml, package.json, pyproject.toml or
//! requirements.txt, go.mod) installed from Debian's packages and their registries in the
//! firewall presets.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

const DEVCONTAINER: &str = include_str!("../../../templates/init/devcontainer.json");
const DOCKERFILE: &str = include_str!("../../../templates/init/Dockerfile");

/// The files `yolo init` writes for one agent in one workspace, and what it saw there.
pub(crate) struct Init {
    plan: Plan,
    /// The folder of the config (made if missing).
    dir: PathBuf,
    /// devcontainer.json, then the Dockerfile beside it, each with its text.
    files: [(PathBuf, String); 2],
}

impl Init {
    /// The templates filled for `agent` and what `workspace` (default: the current folder)
    /// shows; the config at `config`, by default `.devcontainer/devcontainer.json` in it.
    pub(crate) fn new(
        workspace: Option<&Path>,
        config: Option<&Path>,
        agent: &str,
    ) -> Result<Init> {
        let workspace = workspace
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        // A missing workspace is "nothing found" (66), as for every other command.
        crate::project::workspace_dir(Some(&workspace))?;
        let plan = Plan::new(agent, detect(&file_names(&workspace)?)).ok_or_else(|| {
            Error::Usage(format!("no template for agent {agent:?}; templates exist for claude, codex, gemini, aider, opencode"))
        })?;
        // `--config PATH` says where devcontainer.json goes; its Dockerfile goes next to it.
        let config = config
            .map(Path::to_path_buf)
            .unwrap_or_else(|| workspace.join(".devcontainer").join("devcontainer.json"));
        let dir = config
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let files = [
            (config.clone(), plan.fill(DEVCONTAINER, agent)),
            (dir.join("Dockerfile"), plan.fill(DOCKERFILE, agent)),
        ];
        Ok(Init { plan, dir, files })
    }

    /// The first of its files that is there already.
    pub(crate) fn existing(&self) -> Option<&Path> {
        self.files
            .iter()
            .map(|(p, _)| p.as_path())
            .find(|p| p.exists())
    }

    /// What it saw and what it does about it, in one line.
    pub(crate) fn detected(&self) -> String {
        detected(&self.plan)
    }

    /// Write the files, calling `wrote` after each.
    pub(crate) fn write(&self, mut wrote: impl FnMut(&Path)) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        for (path, text) in &self.files {
            std::fs::write(path, text).map_err(|e| Error::io(path, e))?;
            wrote(path);
        }
        Ok(())
    }
}

/// How each agent is installed in the template image: (apt packages, RUN line, presets).
/// How an agent's template installs it: Debian packages, the Dockerfile step, its presets.
struct Recipe {
    packages: &'static str,
    install: &'static str,
    presets: &'static [&'static str],
}

fn recipe(agent: &str) -> Option<Recipe> {
    let npm = |install| Recipe {
        packages: "nodejs npm",
        install,
        presets: &["npm", "github"],
    };
    Some(match agent {
        "claude" => npm("RUN npm install -g @anthropic-ai/claude-code"),
        "codex" => npm("RUN npm install -g @openai/codex"),
        // gemini-cli needs Node 20 or newer, and Debian 12 ships 18: a newer Node from the npm
        // registry itself (the `node` package's binary is an npm package too), so the build
        // needs no host beyond the npm preset.
        "gemini" => npm("RUN npm install -g node@22 && npm install -g @google/gemini-cli"),
        "opencode" => npm("RUN npm install -g opencode-ai"),
        "aider" => Recipe {
            packages: "python3 python3-venv",
            install: "RUN python3 -m venv /opt/aider && /opt/aider/bin/pip install aider-chat && ln -s /opt/aider/bin/aider /usr/local/bin/aider",
            presets: &["pypi", "github"],
        },
        _ => return None,
    })
}

/// A toolchain `yolo init` recognizes in a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Toolchain {
    Rust,
    Node,
    Python,
    Go,
}

impl Toolchain {
    const ALL: [Toolchain; 4] = [
        Toolchain::Rust,
        Toolchain::Node,
        Toolchain::Python,
        Toolchain::Go,
    ];

    /// Top-level files that show the repository uses it.
    fn markers(self) -> &'static [&'static str] {
        match self {
            Toolchain::Rust => &["Cargo.toml"],
            Toolchain::Node => &["package.json"],
            Toolchain::Python => &["pyproject.toml", "requirements.txt"],
            Toolchain::Go => &["go.mod"],
        }
    }

    /// Debian (bookworm) packages: the image is built with apt only.
    fn packages(self) -> &'static str {
        match self {
            Toolchain::Rust => "cargo rustc",
            Toolchain::Node => "nodejs npm",
            Toolchain::Python => "python3 python3-pip python3-venv",
            Toolchain::Go => "golang-go",
        }
    }

    /// The firewall preset of its package registry.
    fn preset(self) -> &'static str {
        match self {
            Toolchain::Rust => "crates",
            Toolchain::Node => "npm",
            Toolchain::Python => "pypi",
            Toolchain::Go => "go",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Toolchain::Rust => "Rust",
            Toolchain::Node => "Node.js",
            Toolchain::Python => "Python",
            Toolchain::Go => "Go",
        }
    }
}

/// The toolchains a repository's top-level file names show, each with the file that showed
/// it, in a fixed order (Rust, Node.js, Python, Go).
pub(crate) fn detect(files: &[impl AsRef<str>]) -> Vec<(Toolchain, &'static str)> {
    Toolchain::ALL
        .into_iter()
        .filter_map(|t| {
            let marker = t
                .markers()
                .iter()
                .find(|m| files.iter().any(|f| f.as_ref() == **m))?;
            Some((t, *marker))
        })
        .collect()
}

/// What goes into the templates: the agent's and the toolchains' packages and presets,
/// each once, in order.
struct Plan {
    packages: Vec<&'static str>,
    presets: Vec<&'static str>,
    install: &'static str,
    toolchains: Vec<(Toolchain, &'static str)>,
}

impl Plan {
    fn new(agent: &str, toolchains: Vec<(Toolchain, &'static str)>) -> Option<Plan> {
        let Recipe {
            packages,
            install,
            presets,
        } = recipe(agent)?;
        let mut plan = Plan {
            packages: vec![],
            presets: vec![],
            install,
            toolchains,
        };
        let toolchain_packages = plan.toolchains.iter().map(|(t, _)| t.packages());
        for package in std::iter::once(packages)
            .chain(toolchain_packages)
            .flat_map(str::split_whitespace)
        {
            if !plan.packages.contains(&package) {
                plan.packages.push(package);
            }
        }
        let toolchain_presets = plan.toolchains.iter().map(|(t, _)| t.preset());
        for preset in presets.iter().copied().chain(toolchain_presets) {
            if !plan.presets.contains(&preset) {
                plan.presets.push(preset);
            }
        }
        Some(plan)
    }

    fn fill(&self, template: &str, agent: &str) -> String {
        let presets: Vec<String> = self.presets.iter().map(|p| format!("\"{p}\"")).collect();
        let toolchains = if self.toolchains.is_empty() {
            "none detected; add their Debian packages to the list below".to_string()
        } else {
            let found: Vec<String> = self
                .toolchains
                .iter()
                .map(|(t, file)| format!("{} ({file})", t.name()))
                .collect();
            found.join(", ")
        };
        template
            .replace("{{AGENT}}", agent)
            .replace("{{PACKAGES}}", &self.packages.join(" "))
            .replace("{{INSTALL}}", self.install)
            .replace("{{PRESETS}}", &presets.join(", "))
            .replace("{{TOOLCHAINS}}", &toolchains)
    }
}

/// The names in the workspace's top folder (a missing folder is an error: nothing to look at).
fn file_names(workspace: &Path) -> Result<Vec<String>> {
    let entries = std::fs::read_dir(workspace).map_err(|e| Error::io(workspace, e))?;
    Ok(entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect())
}

/// What `yolo init` saw and what it does about it, in one line.
fn detected(plan: &Plan) -> String {
    if plan.toolchains.is_empty() {
        let markers: Vec<&str> = Toolchain::ALL
            .iter()
            .flat_map(|t| t.markers().iter().copied())
            .collect();
        return format!(
            "no toolchain detected (looked for {}): the image gets the agent's tools only",
            markers.join(", ")
        );
    }
    let found: Vec<String> = plan
        .toolchains
        .iter()
        .map(|(t, file)| format!("{} ({file})", t.name()))
        .collect();
    let packages: Vec<&str> = plan.toolchains.iter().map(|(t, _)| t.packages()).collect();
    let presets: Vec<&str> = plan.toolchains.iter().map(|(t, _)| t.preset()).collect();
    format!(
        "detected {}: the Dockerfile installs {} and the firewall allows the {} preset{}",
        found.join(", "),
        packages.join(" "),
        presets.join(", "),
        if presets.len() == 1 { "" } else { "s" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detected_names(files: &[&str]) -> Vec<(&'static str, &'static str)> {
        detect(files)
            .into_iter()
            .map(|(t, file)| (t.preset(), file))
            .collect()
    }

    #[test]
    fn detects_each_toolchain_by_its_files() {
        assert_eq!(
            detected_names(&["Cargo.toml", "src"]),
            [("crates", "Cargo.toml")]
        );
        assert_eq!(detected_names(&["package.json"]), [("npm", "package.json")]);
        assert_eq!(
            detected_names(&["pyproject.toml"]),
            [("pypi", "pyproject.toml")]
        );
        assert_eq!(
            detected_names(&["requirements.txt"]),
            [("pypi", "requirements.txt")]
        );
        assert_eq!(detected_names(&["go.mod", "go.sum"]), [("go", "go.mod")]);
    }

    #[test]
    fn detects_several_in_a_fixed_order_and_nothing_in_unrelated_files() {
        assert_eq!(
            detected_names(&[
                "go.mod",
                "requirements.txt",
                "pyproject.toml",
                "package.json",
                "Cargo.toml"
            ]),
            [
                ("crates", "Cargo.toml"),
                ("npm", "package.json"),
                ("pypi", "pyproject.toml"),
                ("go", "go.mod"),
            ]
        );
        assert!(detect(&["README.md", "cargo.toml", "Cargo.lock", "src/go.mod"]).is_empty());
        assert!(detect(&Vec::<String>::new()).is_empty());
    }

    #[test]
    fn the_templates_get_agent_and_toolchain_packages_and_presets_once() {
        let plan = Plan::new("claude", detect(&["Cargo.toml", "package.json"])).unwrap();
        assert_eq!(plan.packages, ["nodejs", "npm", "cargo", "rustc"]);
        assert_eq!(plan.presets, ["npm", "github", "crates"]);
        let json = plan.fill(DEVCONTAINER, "claude");
        assert!(
            json.contains(r#""presets": ["npm", "github", "crates"]"#),
            "{json}"
        );
        let dockerfile = plan.fill(DOCKERFILE, "claude");
        assert!(
            dockerfile.contains("FROM debian:bookworm-slim"),
            "{dockerfile}"
        );
        assert!(
            dockerfile.contains("sudo nodejs npm cargo rustc \\"),
            "{dockerfile}"
        );
        assert!(
            dockerfile.contains("# Toolchains: Rust (Cargo.toml), Node.js (package.json)"),
            "{dockerfile}"
        );
        assert!(!dockerfile.contains("{{") && !json.contains("{{"));
        assert!(Plan::new("nope", vec![]).is_none());
    }

    #[test]
    fn every_toolchain_preset_exists_and_packages_come_from_debian() {
        for t in Toolchain::ALL {
            assert!(crate::firewall::presets::load(t.preset()).is_ok(), "{t:?}");
            assert!(!t.packages().is_empty());
        }
        let plan = Plan::new("aider", detect(&["go.mod", "pyproject.toml"])).unwrap();
        assert_eq!(
            plan.packages,
            ["python3", "python3-venv", "python3-pip", "golang-go"]
        );
        assert_eq!(plan.presets, ["pypi", "github", "go"]);
    }

    #[test]
    fn says_what_it_found() {
        let plan = Plan::new("claude", detect(&["Cargo.toml"])).unwrap();
        assert_eq!(
            detected(&plan),
            "detected Rust (Cargo.toml): the Dockerfile installs cargo rustc and the firewall allows the crates preset"
        );
        let none = Plan::new("claude", vec![]).unwrap();
        assert_eq!(
            detected(&none),
            "no toolchain detected (looked for Cargo.toml, package.json, pyproject.toml, requirements.txt, go.mod): the image gets the agent's tools only"
        );
    }
}
