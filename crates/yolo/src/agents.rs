//! Agent presets: how to run each agent unattended, which host env vars it may see, where it keeps
//! its login state, and which network presets it needs.
//!
//! Pure data plus the merge with the user's `[agents.NAME]` sections; nothing here checks whether
//! an agent is installed in the image (the caller does, and prints `install_hint`).

use crate::error::{Error, Result};
use crate::user_config::{UserAgent, UserConfig};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Agent {
    pub(crate) name: String,
    /// argv for unattended ("YOLO") mode; user args are appended.
    pub(crate) command: Vec<String>,
    /// Host env vars passed through when set (API keys), and only those.
    pub(crate) env: Vec<String>,
    /// Firewall presets (names of files in firewall/) the agent needs.
    pub(crate) presets: Vec<String>,
    /// Extra domains the agent needs beyond its presets.
    pub(crate) domains: Vec<String>,
    /// Folder under the remote user's home kept in a named volume, e.g. `.claude`.
    pub(crate) state_dir: String,
    /// How to install it, for the "not in the image" message.
    pub(crate) install_hint: String,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

struct Preset {
    name: &'static str,
    command: &'static [&'static str],
    env: &'static [&'static str],
    presets: &'static [&'static str],
    domains: &'static [&'static str],
    state_dir: &'static str,
    install: &'static str,
}

/// Model providers aider and opencode can talk to, by their API key variables.
const MULTI_PROVIDER_ENV: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
];

const PRESETS: &[Preset] = &[
    Preset {
        name: "claude",
        command: &["claude", "--dangerously-skip-permissions"],
        env: &[
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "ANTHROPIC_BASE_URL",
        ],
        presets: &["anthropic"],
        domains: &[],
        state_dir: ".claude",
        install: "npm install -g @anthropic-ai/claude-code",
    },
    Preset {
        name: "codex",
        command: &["codex", "--dangerously-bypass-approvals-and-sandbox"],
        env: &["OPENAI_API_KEY", "OPENAI_BASE_URL"],
        presets: &["openai"],
        domains: &[],
        state_dir: ".codex",
        install: "npm install -g @openai/codex",
    },
    Preset {
        name: "gemini",
        command: &["gemini", "--yolo"],
        env: &[
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "GOOGLE_GENAI_USE_VERTEXAI",
        ],
        presets: &["google-gemini"],
        domains: &[],
        state_dir: ".gemini",
        install: "npm install -g @google/gemini-cli",
    },
    Preset {
        name: "aider",
        command: &["aider", "--yes-always"],
        env: MULTI_PROVIDER_ENV,
        presets: &["anthropic", "openai", "google-gemini"],
        domains: &["openrouter.ai", "api.deepseek.com"],
        state_dir: ".aider",
        install: "python3 -m pip install aider-chat",
    },
    Preset {
        name: "opencode",
        // `--auto` approves every permission request not explicitly denied in opencode.json.
        command: &["opencode", "--auto"],
        env: MULTI_PROVIDER_ENV,
        presets: &["anthropic", "openai", "google-gemini"],
        // opencode fetches its model catalogue from models.dev.
        domains: &[
            "opencode.ai",
            "models.dev",
            "openrouter.ai",
            "api.deepseek.com",
        ],
        state_dir: ".local/share/opencode",
        install: "npm install -g opencode-ai",
    },
];

impl Preset {
    fn agent(&self) -> Agent {
        Agent {
            name: self.name.into(),
            command: strings(self.command),
            env: strings(self.env),
            presets: strings(self.presets),
            domains: strings(self.domains),
            state_dir: self.state_dir.into(),
            install_hint: format!(
                "{} in your Dockerfile, or `yolo init --agent {}`",
                self.install, self.name
            ),
        }
    }
}

/// The built-in presets: claude, codex, gemini, aider, opencode.
pub(crate) fn presets() -> Vec<Agent> {
    PRESETS.iter().map(Preset::agent).collect()
}

/// A preset or a user-defined agent (user config wins). Unknown: error listing the known names.
///
/// A user section named like a preset extends it: a non-empty `command` replaces the preset's,
/// `env` and `domains` are added to the preset's, `state_dir` replaces it. A section with a new
/// name defines an agent and must have a `command`.
pub(crate) fn resolve(name: &str, user: &UserConfig) -> Result<Agent> {
    let preset = presets().into_iter().find(|a| a.name == name);
    match (preset, user.agents.get(name)) {
        (preset, Some(custom)) => merge(name, preset, custom),
        (Some(preset), None) => Ok(preset),
        (None, None) => Err(unknown_agent(name, user)),
    }
}

/// Every agent (presets + user's), for mounting their state volumes at container creation.
/// User sections that do not resolve (e.g. no command) are left out; `resolve` reports them.
pub(crate) fn all(user: &UserConfig) -> Vec<Agent> {
    let preset_names = PRESETS.iter().map(|p| p.name);
    let user_names = user
        .agents
        .keys()
        .map(String::as_str)
        .filter(|n| !is_preset(n));
    preset_names
        .chain(user_names)
        .filter_map(|name| resolve(name, user).ok())
        .collect()
}

fn is_preset(name: &str) -> bool {
    PRESETS.iter().any(|p| p.name == name)
}

fn section(name: &str) -> String {
    format!("[agents.{name}] in {}", UserConfig::path().display())
}

fn user_error(name: &str, message: String) -> Error {
    Error::UserConfig {
        file: UserConfig::path(),
        message: format!("[agents.{name}]: {message}"),
    }
}

fn unknown_agent(name: &str, user: &UserConfig) -> Error {
    let mut known: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
    known.extend(
        user.agents
            .keys()
            .map(String::as_str)
            .filter(|n| !is_preset(n)),
    );
    Error::Usage(format!(
        "unknown agent \"{name}\"; known agents: {}. To define it, add an [agents.{name}] section with a command to {}",
        known.join(", "),
        UserConfig::path().display()
    ))
}

fn merge(name: &str, preset: Option<Agent>, custom: &UserAgent) -> Result<Agent> {
    check_name(name)?;
    if custom.command.first().is_some_and(|c| c.trim().is_empty()) {
        return Err(user_error(
            name,
            "the first word of \"command\" is empty".into(),
        ));
    }
    let mut agent = match preset {
        Some(preset) => preset,
        None if custom.command.is_empty() => {
            return Err(user_error(
                name,
                "\"command\" is empty: say how to run the agent, e.g. command = [\"my-agent\", \"--yes\"]".into(),
            ))
        }
        None => new_agent(name, custom),
    };
    if !custom.command.is_empty() {
        agent.command = custom.command.clone();
    }
    extend_unique(&mut agent.env, &custom.env);
    extend_unique(&mut agent.domains, &custom.domains);
    if let Some(dir) = &custom.state_dir {
        agent.state_dir = check_state_dir(name, dir)?;
    }
    Ok(agent)
}

fn new_agent(name: &str, custom: &UserAgent) -> Agent {
    let program = custom.command.first().cloned().unwrap_or_default();
    Agent {
        name: name.into(),
        command: Vec::new(),
        env: Vec::new(),
        presets: Vec::new(),
        domains: Vec::new(),
        state_dir: format!(".{name}"),
        install_hint: format!(
            "install `{program}` in your Dockerfile (the agent is defined in {})",
            section(name)
        ),
    }
}

/// The name becomes part of a Docker volume name.
fn check_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(user_error(
            name,
            "an agent name may use only letters, digits, '_', '.' and '-' (it names a volume)"
                .into(),
        ))
    }
}

/// Relative to the home folder, without `..`: the volume must land inside the home.
fn check_state_dir(name: &str, dir: &str) -> Result<String> {
    let dir = dir.trim().trim_end_matches('/');
    let escapes = dir.split('/').any(|part| part == "..");
    if dir.is_empty() || dir.starts_with('/') || escapes {
        return Err(user_error(
            name,
            format!("\"state_dir\" = \"{dir}\" must be a folder below the home folder, like \".my-agent\""),
        ));
    }
    Ok(dir.into())
}

fn extend_unique(list: &mut Vec<String>, more: &[String]) {
    for item in more {
        if !list.contains(item) {
            list.push(item.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_with(name: &str, agent: UserAgent) -> UserConfig {
        let mut user = UserConfig::default();
        user.agents.insert(name.into(), agent);
        user
    }

    /// `bring_up::network::allowlist` takes these as they are: nothing checks them at run time.
    #[test]
    fn every_preset_agent_names_known_firewall_presets_and_valid_domains() {
        for agent in presets() {
            for name in &agent.presets {
                crate::firewall::presets::load(name)
                    .unwrap_or_else(|e| panic!("{}: {e}", agent.name));
            }
            crate::firewall::allowlist::Allowlist::parse(&agent.domains)
                .unwrap_or_else(|e| panic!("{}: {e}", agent.name));
        }
    }

    #[test]
    fn presets_run_unattended() {
        let command = |name: &str| resolve(name, &UserConfig::default()).unwrap().command;
        assert_eq!(
            command("claude"),
            ["claude", "--dangerously-skip-permissions"]
        );
        assert_eq!(
            command("codex"),
            ["codex", "--dangerously-bypass-approvals-and-sandbox"]
        );
        assert_eq!(command("gemini"), ["gemini", "--yolo"]);
        assert_eq!(command("aider"), ["aider", "--yes-always"]);
        assert_eq!(command("opencode"), ["opencode", "--auto"]);
    }

    #[test]
    fn presets_are_complete() {
        let names: Vec<String> = presets().into_iter().map(|a| a.name).collect();
        assert_eq!(names, ["claude", "codex", "gemini", "aider", "opencode"]);
        for agent in presets() {
            assert!(!agent.env.is_empty(), "{}", agent.name);
            assert!(!agent.presets.is_empty(), "{}", agent.name);
            assert!(!agent.state_dir.is_empty() && !agent.state_dir.starts_with('/'));
            assert!(agent
                .install_hint
                .contains(&format!("yolo init --agent {}", agent.name)));
        }
    }

    #[test]
    fn claude_preset_details() {
        let claude = resolve("claude", &UserConfig::default()).unwrap();
        assert!(claude.env.contains(&"CLAUDE_CODE_OAUTH_TOKEN".to_string()));
        assert!(claude.env.contains(&"ANTHROPIC_API_KEY".to_string()));
        assert_eq!(claude.presets, ["anthropic"]);
        assert_eq!(claude.state_dir, ".claude");
        assert!(claude
            .install_hint
            .starts_with("npm install -g @anthropic-ai/claude-code"));
    }

    #[test]
    fn other_presets_details() {
        let get = |n: &str| resolve(n, &UserConfig::default()).unwrap();
        assert_eq!(get("codex").presets, ["openai"]);
        assert_eq!(get("codex").state_dir, ".codex");
        assert!(get("gemini")
            .env
            .contains(&"GOOGLE_CLOUD_PROJECT".to_string()));
        assert_eq!(get("gemini").presets, ["google-gemini"]);
        assert!(get("aider").env.contains(&"OPENROUTER_API_KEY".to_string()));
        assert_eq!(get("opencode").state_dir, ".local/share/opencode");
        assert!(get("opencode").domains.contains(&"models.dev".to_string()));
    }

    #[test]
    fn unknown_agent_lists_known_and_points_to_config() {
        let user = user_with(
            "mine",
            UserAgent {
                command: vec!["mine".into()],
                ..Default::default()
            },
        );
        let message = resolve("nope", &user).unwrap_err().to_string();
        assert!(message.contains("unknown agent \"nope\""), "{message}");
        assert!(
            message.contains("claude, codex, gemini, aider, opencode, mine"),
            "{message}"
        );
        assert!(message.contains("[agents.nope]"), "{message}");
    }

    #[test]
    fn user_agent_is_defined() {
        let custom = UserAgent {
            command: vec!["my-agent".into(), "--yes".into()],
            env: vec!["MY_KEY".into()],
            domains: vec!["api.example.com".into()],
            state_dir: None,
        };
        let agent = resolve("mine", &user_with("mine", custom)).unwrap();
        assert_eq!(agent.command, ["my-agent", "--yes"]);
        assert_eq!(agent.env, ["MY_KEY"]);
        assert_eq!(agent.domains, ["api.example.com"]);
        assert!(agent.presets.is_empty());
        assert_eq!(agent.state_dir, ".mine");
        assert!(
            agent.install_hint.contains("`my-agent`"),
            "{}",
            agent.install_hint
        );
        assert!(agent.install_hint.contains("[agents.mine]"));
    }

    #[test]
    fn user_section_extends_a_preset() {
        let custom = UserAgent {
            env: vec!["HTTPS_PROXY".into(), "ANTHROPIC_API_KEY".into()],
            domains: vec!["proxy.example.com".into()],
            ..Default::default()
        };
        let agent = resolve("claude", &user_with("claude", custom)).unwrap();
        assert_eq!(agent.command, ["claude", "--dangerously-skip-permissions"]);
        assert_eq!(
            agent
                .env
                .iter()
                .filter(|e| *e == "ANTHROPIC_API_KEY")
                .count(),
            1
        );
        assert_eq!(agent.env.last().unwrap(), "HTTPS_PROXY");
        assert_eq!(agent.domains, ["proxy.example.com"]);
        assert_eq!(agent.presets, ["anthropic"]);
    }

    #[test]
    fn user_section_replaces_preset_command_and_state_dir() {
        let custom = UserAgent {
            command: vec!["claude".into(), "--model".into(), "opus".into()],
            state_dir: Some(".config/claude/".into()),
            ..Default::default()
        };
        let agent = resolve("claude", &user_with("claude", custom)).unwrap();
        assert_eq!(agent.command, ["claude", "--model", "opus"]);
        assert_eq!(agent.state_dir, ".config/claude");
    }

    #[test]
    fn user_agent_without_command_is_an_error() {
        let user = user_with("mine", UserAgent::default());
        let message = resolve("mine", &user).unwrap_err().to_string();
        assert!(message.contains("[agents.mine]"), "{message}");
        assert!(message.contains("\"command\" is empty"), "{message}");
        let blank = user_with(
            "mine",
            UserAgent {
                command: vec![" ".into()],
                ..Default::default()
            },
        );
        assert!(resolve("mine", &blank).is_err());
    }

    #[test]
    fn bad_state_dir_and_name_are_errors() {
        for dir in ["/etc", "../escape", "a/../../b", ""] {
            let custom = UserAgent {
                command: vec!["x".into()],
                state_dir: Some(dir.into()),
                ..Default::default()
            };
            assert!(resolve("x", &user_with("x", custom)).is_err(), "{dir}");
        }
        let custom = UserAgent {
            command: vec!["x".into()],
            ..Default::default()
        };
        let message = resolve("my agent", &user_with("my agent", custom))
            .unwrap_err()
            .to_string();
        assert!(message.contains("names a volume"), "{message}");
    }

    #[test]
    fn all_lists_presets_then_valid_user_agents() {
        let mut user = user_with(
            "mine",
            UserAgent {
                command: vec!["m".into()],
                ..Default::default()
            },
        );
        user.agents.insert("broken".into(), UserAgent::default());
        user.agents.insert(
            "codex".into(),
            UserAgent {
                state_dir: Some(".codex2".into()),
                ..Default::default()
            },
        );
        let agents = all(&user);
        let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            names,
            ["claude", "codex", "gemini", "aider", "opencode", "mine"]
        );
        assert_eq!(agents[1].state_dir, ".codex2");
    }
}
