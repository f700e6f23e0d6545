//! Credentials the guard adds on the way out, so the agent never holds the user's keys.
//!
//! A credential comes from the user's config (`[credentials.NAME]`, never the repository's) or
//! from a preset of the agent's provider (ANTHROPIC_API_KEY for `yolo run claude`, ...) when its
//! variable is set on the host and the agent would have been handed it. Its real value is read
//! on the host at `up`/`run` time (a variable, a file, or a command's output), goes to the guard
//! over its control socket and nowhere else; the agent gets a stand-in in its place, random per
//! session and shaped like the real one (SDKs check prefixes). The guard swaps the stand-in for
//! the real value only on requests to the credential's hosts.
//!
//! Also here: [`secret_shape`], which tells `up`/`run` that a value handed to the agent as is
//! looks like a key that could be declared as a credential instead.

use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One `[credentials.NAME]` section of the user's config.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub(crate) struct UserCredential {
    /// Where the real value may go (allowlist patterns: `api.example.com`, `*.example.com`).
    pub(crate) hosts: Vec<String>,
    /// The HTTP header that carries it (`x-api-key`, `authorization`).
    pub(crate) header: String,
    /// What comes before the value in the header (`Bearer `).
    #[serde(default)]
    pub(crate) value_prefix: String,
    /// A host variable holding the value.
    pub(crate) from_env: Option<String>,
    /// A file holding the value (its first line).
    pub(crate) from_file: Option<PathBuf>,
    /// A program (no shell) whose output's first line is the value (`["gh", "auth", "token"]`).
    pub(crate) from_command: Option<Vec<String>>,
    /// The variable the agent gets, holding the stand-in; none: the agent gets no variable
    /// (a tool that reads its key from a file of its own still has the guard add it).
    pub(crate) agent_env: Option<String>,
}

/// A credential of the agent's provider, used without any configuration when its variable is
/// set on the host and handed to the agent.
struct Preset {
    /// The host variable, which is also the agent's.
    var: &'static str,
    hosts: &'static [&'static str],
    header: &'static str,
    value_prefix: &'static str,
}

/// The presets: the model APIs of the agent presets, and GitHub (the API and git over HTTPS,
/// whose Basic authentication carries the token as its password; the guard looks inside it).
const PRESETS: &[Preset] = &[
    Preset {
        var: "ANTHROPIC_API_KEY",
        hosts: &["api.anthropic.com"],
        header: "x-api-key",
        value_prefix: "",
    },
    Preset {
        var: "ANTHROPIC_AUTH_TOKEN",
        hosts: &["api.anthropic.com"],
        header: "authorization",
        value_prefix: "Bearer ",
    },
    Preset {
        var: "CLAUDE_CODE_OAUTH_TOKEN",
        hosts: &["api.anthropic.com"],
        header: "authorization",
        value_prefix: "Bearer ",
    },
    Preset {
        var: "OPENAI_API_KEY",
        hosts: &["api.openai.com"],
        header: "authorization",
        value_prefix: "Bearer ",
    },
    Preset {
        var: "GEMINI_API_KEY",
        hosts: &["generativelanguage.googleapis.com"],
        header: "x-goog-api-key",
        value_prefix: "",
    },
    Preset {
        var: "GOOGLE_API_KEY",
        hosts: &["generativelanguage.googleapis.com"],
        header: "x-goog-api-key",
        value_prefix: "",
    },
    Preset {
        var: "OPENROUTER_API_KEY",
        hosts: &["openrouter.ai"],
        header: "authorization",
        value_prefix: "Bearer ",
    },
    Preset {
        var: "DEEPSEEK_API_KEY",
        hosts: &["api.deepseek.com"],
        header: "authorization",
        value_prefix: "Bearer ",
    },
    Preset {
        var: "GH_TOKEN",
        hosts: &["api.github.com", "github.com"],
        header: "authorization",
        value_prefix: "",
    },
    Preset {
        var: "GITHUB_TOKEN",
        hosts: &["api.github.com", "github.com"],
        header: "authorization",
        value_prefix: "",
    },
];

/// The host variables the presets read.
pub(crate) fn preset_vars() -> impl Iterator<Item = &'static str> {
    PRESETS.iter().map(|p| p.var)
}

/// A credential ready for the session: its real value read, its stand-in not made yet.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Credential {
    /// The section's name, or `preset:VAR`.
    pub(crate) name: String,
    pub(crate) hosts: Vec<String>,
    pub(crate) header: String,
    pub(crate) value_prefix: String,
    pub(crate) agent_env: Option<String>,
    /// The real value. Never printed: `Debug` shows its fingerprint.
    pub(crate) real: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .field("header", &self.header)
            .field("agent_env", &self.agent_env)
            .field("real", &fingerprint(&self.real))
            .finish()
    }
}

/// `sha256:` and the first 12 hex digits of the value's SHA-256: what logs and messages show
/// of a secret.
pub(crate) fn fingerprint(value: &str) -> String {
    use sha2::{Digest, Sha256};
    let hash = Sha256::digest(value.as_bytes());
    format!("sha256:{}", &hex::encode(hash)[..12])
}

/// Where values are read from: the host's environment and programs, or a test's.
pub(crate) trait Source {
    fn var(&self, name: &str) -> Option<String>;
    fn run(&self, argv: &[String]) -> std::result::Result<String, String>;
}

/// The host: its environment, its files, its programs.
pub(crate) struct Host;

impl Source for Host {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn run(&self, argv: &[String]) -> std::result::Result<String, String> {
        let (program, args) = argv.split_first().ok_or("the command is empty")?;
        let out = std::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run {program}: {e}"))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().last().unwrap_or("").trim();
            return Err(format!("{program} failed ({}): {last}", out.status));
        }
        String::from_utf8(out.stdout).map_err(|_| format!("{program} printed something not UTF-8"))
    }
}

/// The credentials of a session: the user's sections (`file` is the config they came from, for
/// messages), then the presets of the variables the agent would be handed (`agent_vars`) that
/// are set on the host and not already a section's `agent_env`.
pub(crate) fn resolve(
    user: &BTreeMap<String, UserCredential>,
    file: &Path,
    agent_vars: &[String],
    source: &dyn Source,
) -> Result<Vec<Credential>> {
    let mut out = Vec::new();
    for (name, section) in user {
        let bad = |message: String| Error::UserConfig {
            file: file.to_path_buf(),
            message: format!("[credentials.{name}]: {message}"),
        };
        check_section(section).map_err(bad)?;
        let real = read_value(section, source).map_err(bad)?;
        out.push(Credential {
            name: name.clone(),
            hosts: section.hosts.clone(),
            header: section.header.to_ascii_lowercase(),
            value_prefix: section.value_prefix.clone(),
            agent_env: section.agent_env.clone(),
            real,
        });
    }
    for preset in PRESETS {
        let handed = agent_vars.iter().any(|v| v == preset.var);
        let taken = out
            .iter()
            .any(|c| c.agent_env.as_deref() == Some(preset.var));
        let Some(real) = source.var(preset.var).filter(|v| !v.is_empty()) else {
            continue;
        };
        if !handed || taken {
            continue;
        }
        out.push(Credential {
            name: format!("preset:{}", preset.var),
            hosts: preset.hosts.iter().map(|h| h.to_string()).collect(),
            header: preset.header.into(),
            value_prefix: preset.value_prefix.into(),
            agent_env: Some(preset.var.into()),
            real,
        });
    }
    Ok(out)
}

/// What a section must hold: hosts, a header name, one source, a variable name.
fn check_section(section: &UserCredential) -> std::result::Result<(), String> {
    if section.hosts.is_empty() {
        return Err("`hosts` is empty: name where the value may go".into());
    }
    for host in &section.hosts {
        host.parse::<yolo_protocol::allowlist::Pattern>()
            .map_err(|e| format!("`hosts`: {e}"))?;
    }
    let header_ok = !section.header.is_empty()
        && section
            .header
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !header_ok {
        return Err(format!(
            "`header` = {:?} is not an HTTP header name (e.g. \"x-api-key\", \"authorization\")",
            section.header
        ));
    }
    if section.value_prefix.chars().any(|c| c.is_control()) {
        return Err("`value_prefix` holds a control character".into());
    }
    let sources = [
        section.from_env.is_some(),
        section.from_file.is_some(),
        section.from_command.is_some(),
    ];
    if sources.iter().filter(|s| **s).count() != 1 {
        return Err("give exactly one of `from_env`, `from_file`, `from_command`".into());
    }
    if let Some(var) = &section.agent_env {
        let ok = !var.is_empty()
            && !var.starts_with(|c: char| c.is_ascii_digit())
            && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(format!("`agent_env` = {var:?} is not a variable name"));
        }
    }
    Ok(())
}

/// The section's value, from its one source: the first line, without surrounding blanks.
fn read_value(
    section: &UserCredential,
    source: &dyn Source,
) -> std::result::Result<String, String> {
    let (text, from) = if let Some(var) = &section.from_env {
        let value = source
            .var(var)
            .ok_or_else(|| format!("`from_env`: {var} is not set on the host"))?;
        (value, var.clone())
    } else if let Some(path) = &section.from_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("`from_file`: cannot read {}: {e}", path.display()))?;
        (text, path.display().to_string())
    } else {
        let argv = section.from_command.as_deref().unwrap_or_default();
        let text = source
            .run(argv)
            .map_err(|e| format!("`from_command`: {e}"))?;
        (text, argv.join(" "))
    };
    let value = text.lines().next().unwrap_or("").trim().to_string();
    if value.is_empty() {
        return Err(format!("the value from {from} is empty"));
    }
    if value.chars().any(|c| c.is_control()) {
        return Err(format!("the value from {from} holds a control character"));
    }
    Ok(value)
}

/// What kind of secret `value` looks like, by the prefixes providers give their keys: `None`
/// for a value that looks like none.
pub(crate) fn secret_shape(value: &str) -> Option<&'static str> {
    const SHAPES: &[(&str, &str)] = &[
        ("sk-ant-", "an Anthropic key"),
        ("sk-", "an OpenAI-style API key"),
        ("ghp_", "a GitHub token"),
        ("gho_", "a GitHub OAuth token"),
        ("ghu_", "a GitHub token"),
        ("ghs_", "a GitHub token"),
        ("github_pat_", "a GitHub token"),
        ("glpat-", "a GitLab token"),
        ("AKIA", "an AWS access key"),
        ("ASIA", "an AWS access key"),
        ("xox", "a Slack token"),
        ("AIza", "a Google API key"),
        ("npm_", "an npm token"),
        ("pypi-", "a PyPI token"),
    ];
    let value = value.trim();
    if value.contains("-----BEGIN") && value.contains("PRIVATE KEY") {
        return Some("a private key");
    }
    if value.len() < 16 {
        return None;
    }
    SHAPES
        .iter()
        .find(|(prefix, _)| value.starts_with(prefix))
        .map(|(_, what)| *what)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake(BTreeMap<String, String>);

    impl Source for Fake {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).cloned()
        }
        fn run(&self, argv: &[String]) -> std::result::Result<String, String> {
            match argv {
                [p, rest @ ..] if p == "echo" => Ok(format!("{}\n", rest.join(" "))),
                _ => Err("no such program".into()),
            }
        }
    }

    fn fake(vars: &[(&str, &str)]) -> Fake {
        Fake(
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn section(toml_text: &str) -> BTreeMap<String, UserCredential> {
        #[derive(Deserialize)]
        struct Doc {
            credentials: BTreeMap<String, UserCredential>,
        }
        toml::from_str::<Doc>(toml_text).unwrap().credentials
    }

    #[test]
    fn a_section_reads_its_value_from_its_one_source() {
        let user = section(
            r#"
            [credentials.example]
            hosts = ["api.example.test"]
            header = "X-Api-Key"
            from_env = "EXAMPLE_KEY"
            agent_env = "EXAMPLE_KEY"
            [credentials.cmd]
            hosts = ["*.example.test"]
            header = "authorization"
            value_prefix = "Bearer "
            from_command = ["echo", "tok-123"]
            "#,
        );
        let got = resolve(
            &user,
            Path::new("c.toml"),
            &[],
            &fake(&[("EXAMPLE_KEY", "real-1\n")]),
        )
        .unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].name, "cmd");
        assert_eq!(got[0].real, "tok-123");
        assert_eq!(got[1].real, "real-1");
        assert_eq!(got[1].header, "x-api-key");
    }

    #[test]
    fn a_section_without_its_value_or_with_two_sources_is_a_config_error() {
        let missing =
            section("[credentials.a]\nhosts = [\"a.test\"]\nheader = \"x\"\nfrom_env = \"NOPE\"\n");
        let err = resolve(&missing, Path::new("c.toml"), &[], &fake(&[])).unwrap_err();
        assert_eq!(err.code(), 65);
        assert!(err.to_string().contains("NOPE is not set"), "{err}");
        let two = section(
            "[credentials.a]\nhosts = [\"a.test\"]\nheader = \"x\"\nfrom_env = \"A\"\nfrom_command = [\"echo\"]\n",
        );
        let err = resolve(&two, Path::new("c.toml"), &[], &fake(&[("A", "v")])).unwrap_err();
        assert!(err.to_string().contains("exactly one"), "{err}");
        let header =
            section("[credentials.a]\nhosts = [\"a.test\"]\nheader = \"x y\"\nfrom_env = \"A\"\n");
        let err = resolve(&header, Path::new("c.toml"), &[], &fake(&[("A", "v")])).unwrap_err();
        assert!(err.to_string().contains("not an HTTP header name"), "{err}");
    }

    #[test]
    fn presets_cover_only_the_variables_the_agent_is_handed_and_set_on_the_host() {
        let host = fake(&[
            ("ANTHROPIC_API_KEY", "sk-ant-api03-real"),
            ("OPENAI_API_KEY", "sk-real"),
        ]);
        let handed = ["ANTHROPIC_API_KEY".to_string(), "GH_TOKEN".to_string()];
        let got = resolve(&BTreeMap::new(), Path::new("c.toml"), &handed, &host).unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].name, "preset:ANTHROPIC_API_KEY");
        assert_eq!(got[0].hosts, ["api.anthropic.com"]);
        assert_eq!(got[0].agent_env.as_deref(), Some("ANTHROPIC_API_KEY"));
    }

    #[test]
    fn a_users_section_for_the_same_variable_replaces_the_preset() {
        let user = section(
            "[credentials.mine]\nhosts = [\"proxy.test\"]\nheader = \"x-api-key\"\nfrom_env = \"ANTHROPIC_API_KEY\"\nagent_env = \"ANTHROPIC_API_KEY\"\n",
        );
        let host = fake(&[("ANTHROPIC_API_KEY", "sk-ant-x")]);
        let got = resolve(
            &user,
            Path::new("c.toml"),
            &["ANTHROPIC_API_KEY".into()],
            &host,
        )
        .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].hosts, ["proxy.test"]);
    }

    #[test]
    fn the_host_runs_a_program_without_a_shell_and_says_why_it_failed() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(Host.run(&argv(&["echo", "a;b"])).unwrap(), "a;b\n");
        let err = Host
            .run(&argv(&["sh", "-c", "echo no >&2; exit 3"]))
            .unwrap_err();
        assert!(err.contains("no"), "{err}");
        assert!(Host
            .run(&argv(&["/nonexistent/prog"]))
            .unwrap_err()
            .contains("cannot run"));
        assert!(Host.run(&[]).is_err());
        assert!(Host.var("PATH").is_some());
    }

    #[test]
    fn debug_shows_a_fingerprint_never_the_value() {
        let c = Credential {
            name: "n".into(),
            hosts: vec![],
            header: "x".into(),
            value_prefix: String::new(),
            agent_env: None,
            real: "very-secret-value".into(),
        };
        let shown = format!("{c:?}");
        assert!(!shown.contains("very-secret-value"), "{shown}");
        assert!(shown.contains(&fingerprint("very-secret-value")));
    }

    #[test]
    fn secret_shapes_are_recognised_and_plain_values_are_not() {
        assert_eq!(
            secret_shape("sk-ant-api03-abcdefghijklmnop"),
            Some("an Anthropic key")
        );
        assert_eq!(
            secret_shape("ghp_abcdefghijklmnopqrstuvwxyz"),
            Some("a GitHub token")
        );
        assert_eq!(
            secret_shape("AKIAABCDEFGHIJKLMNOP"),
            Some("an AWS access key")
        );
        assert_eq!(
            secret_shape("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n"),
            Some("a private key")
        );
        assert_eq!(secret_shape("production"), None);
        assert_eq!(secret_shape("sk-short"), None);
        assert_eq!(secret_shape("/usr/local/bin:/usr/bin"), None);
    }
}
