//! A session's use of the guard's HTTP proxy (issue 25), from the host's side.
//!
//! - `up` (and `run` before its agent) reads the credentials on the host, builds the session's
//!   HTTP settings (`http_config::build`) and puts them in the guard's config with the roots the
//!   proxy verifies real hosts against (the host's and the user's extra CA certificates).
//! - Once the guard is ready, a new session CA (`session_ca`) is made; its certificate goes in
//!   the workspace's CA folder, which the agent container binds where it trusts the extra CA
//!   certificates (`ca::DIR`), and its key and the real values go to the guard over its control
//!   socket (`ProxySecrets`), then are dropped. A guard that lost them (restarted) gets new
//!   ones at the next `up`/`run`.
//! - The stand-ins (variable → stand-in, not secret) are kept with the workspace's state:
//!   `run` hands them to the agent in place of the real values.
//!
//! Also here: the warnings for values shaped like secrets that still reach the agent as is.

use crate::agents::Agent;
use crate::audit::{EventKind, Writer};
use crate::credentials;
use crate::engine::Engine;
use crate::error::Result;
use crate::firewall::control::{Request, Response};
use crate::http_config::{self, HttpSession, Origin, Sources};
use crate::project::Project;
use crate::session::state::HttpState;
use crate::session_ca::SessionCa;
use crate::user_config::UserConfig;
use std::path::Path;
use yolo_protocol::control::ProxySecrets;

/// What `up` hands the guard: the session's HTTP settings and the roots its proxy trusts.
pub(crate) struct Prepared {
    pub(crate) session: HttpSession,
    pub(crate) roots_pem: String,
}

/// The session's HTTP settings for the guard, `None` when nothing is inspected. `agents`: those
/// `up` was given (`run`'s), else the repository's default: their variables are those whose
/// presets apply.
pub(crate) fn prepare(project: &Project, agents: &[Agent]) -> Result<Option<Prepared>> {
    let user = &project.user;
    let agent_vars: Vec<String> = crate::project::with_default_agent(project, agents)
        .iter()
        .flat_map(|a| a.env.clone())
        .collect();
    let user_file = UserConfig::path();
    let resolved = credentials::resolve(
        &user.credentials,
        &user_file,
        &agent_vars,
        &credentials::Host,
    )?;
    let repo = crate::http_scope::repo_http(project.config());
    let origin = origin_of(&project.located().workspace);
    let sources = Sources {
        user_file: &user_file,
        repo_file: &project.located().config_file,
    };
    let session = http_config::build(
        &user.http,
        crate::http_scope::inspect_all(user)?,
        &repo,
        &resolved,
        origin.as_ref(),
        &sources,
        &mut http_config::os_random,
    )?;
    if session.config.is_empty() {
        return Ok(None);
    }
    let roots_pem = match &project.settings.extra_ca {
        Some(extra) => extra.bundle.clone(),
        None => crate::ca::host_roots_pem(),
    };
    Ok(Some(Prepared { session, roots_pem }))
}

/// The workspace's `origin` (for the default of a forge's `git_push`). Read with `git config`,
/// which runs nothing of the repository's (no hook, no fsmonitor); `None` when there is none.
fn origin_of(workspace: &Path) -> Option<Origin> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(workspace)
        .args(["config", "--get", "remote.origin.url"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Origin::from_url(&String::from_utf8_lossy(&out.stdout))
}

/// After `up` brought the guard up (`fresh`: with this `prepared`'s config) or found it
/// running: a fresh guard gets the session's secrets and the state the stand-ins; a kept one
/// gets them again only if it lost them (a restart), with the stand-ins it was started with.
pub(crate) async fn after_up(
    engine: &Engine,
    project: &Project,
    guard: &str,
    fresh: bool,
    prepared: &Prepared,
    state: &mut crate::session::state::WorkspaceState,
) -> Result<()> {
    let names: Vec<String> = prepared
        .session
        .config
        .credentials
        .iter()
        .map(|c| c.name.clone())
        .collect();
    if fresh {
        state.http = Some(HttpState {
            agent_env: prepared.session.agent_env.clone(),
            credentials: names,
        });
        return arm(engine, project, guard, prepared.session.secrets.clone()).await;
    }
    let Some(kept) = &state.http else {
        // A guard started before this yolo wired its proxy: it inspects nothing.
        return Ok(());
    };
    if kept.credentials != names {
        eprintln!(
            "{} the credentials in your config changed since this session's guard started; they apply from the next session (`yolo down`, then `yolo up`)",
            console::style("yolo:").bold()
        );
    }
    let status = engine.control(guard, &Request::Status).await?;
    if needs_secrets(&status) {
        // The guard's config names the credentials of its start: only those are sent.
        let secrets = prepared
            .session
            .secrets
            .iter()
            .filter(|(name, _)| kept.credentials.contains(name))
            .cloned()
            .collect();
        arm(engine, project, guard, secrets).await?;
    }
    Ok(())
}

/// Whether a guard's `status` says its proxy waits for the session's secrets.
fn needs_secrets(status: &Response) -> bool {
    status.proxy_armed == Some(false)
}

/// A new session CA: its certificate where the agent trusts it, its key and the real values to
/// the guard; both dropped here.
async fn arm(
    engine: &Engine,
    project: &Project,
    guard: &str,
    secrets: Vec<(String, String)>,
) -> Result<()> {
    let label: String = project.spec.devcontainer_id.chars().take(12).collect();
    let ca = SessionCa::new(&label)?;
    crate::http_scope::write_ca_files(
        &project.spec.devcontainer_id,
        project.settings.extra_ca.as_ref(),
        Some(&ca.cert_pem),
    )?;
    let request = Request::ProxySecrets(ProxySecrets {
        ca_cert_pem: ca.cert_pem.clone(),
        ca_key_pem: ca.key_pem().to_string(),
        credentials: secrets,
    });
    engine.control(guard, &request).await?;
    Ok(())
}

/// What `exec` and `shell` hand their command: the stand-ins of the session's credentials
/// (`VAR=stand-in`), the same `run` gives its agent, so that a tool started by hand in the
/// container works through the guard's proxy as the agent does; never a real value.
pub(crate) fn stand_in_env(state: &crate::session::state::WorkspaceState) -> Vec<String> {
    state
        .http
        .as_ref()
        .map(|h| {
            h.agent_env
                .iter()
                .map(|(var, stand_in)| format!("{var}={stand_in}"))
                .collect()
        })
        .unwrap_or_default()
}

/// What `run` hands its agent: each of `vars` set on the host, with the stand-in in place of a
/// credential's real value, and each stand-in of a credential whose variable the agent does
/// not list; and a warning for each value handed as is that looks like a secret.
pub(crate) fn agent_env(
    vars: &[String],
    stand_ins: &[(String, String)],
    host: &dyn Fn(&str) -> Option<String>,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut env = Vec::new();
    let mut warnings = Vec::new();
    for var in vars {
        if let Some((_, stand_in)) = stand_ins.iter().find(|(v, _)| v == var) {
            env.push((var.clone(), stand_in.clone()));
        } else if let Some(value) = host(var) {
            if let Some(warning) = secret_warning(var, &value) {
                warnings.push(warning);
            }
            env.push((var.clone(), value));
        }
    }
    for (var, stand_in) in stand_ins {
        if !vars.contains(var) {
            env.push((var.clone(), stand_in.clone()));
        }
    }
    (env, warnings)
}

/// The warning for `var` handed to the agent as is, if its value looks like a secret: which
/// variable, and how to keep it outside instead.
pub(crate) fn secret_warning(var: &str, value: &str) -> Option<String> {
    let what = credentials::secret_shape(value)?;
    Some(format!(
        "{var} holds what looks like {what}, and the agent gets it as is; to keep it outside the container, declare it as a credential in {}: [credentials.{name}] hosts = [\"HOST\"], header = \"HEADER\", from_env = \"{var}\", agent_env = \"{var}\" (docs/configuration.md, \"Credentials\")",
        UserConfig::path().display(),
        name = var.to_ascii_lowercase(),
    ))
}

/// Print the warnings (`yolo:` on stderr) and record them as notices of the session.
pub(crate) fn warn(warnings: &[String], writer: Option<&Writer>) {
    for warning in warnings {
        eprintln!("{} {warning}", console::style("yolo:").bold());
        if let Some(writer) = writer {
            let _ = writer.write(EventKind::Notice {
                message: warning.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_gets_stand_ins_in_place_of_credentials_and_a_warning_for_keys_as_is() {
        let host = |var: &str| -> Option<String> {
            match var {
                "ANTHROPIC_API_KEY" => Some("sk-ant-api03-REALREALREALREALREAL".into()),
                "GH_TOKEN" => Some("ghp_0123456789abcdefghij0123".into()),
                "OPENAI_BASE_URL" => Some("https://api.example.test".into()),
                _ => None,
            }
        };
        let vars: Vec<String> = ["ANTHROPIC_API_KEY", "GH_TOKEN", "OPENAI_BASE_URL", "UNSET"]
            .map(String::from)
            .to_vec();
        let stand_ins = vec![
            (
                "ANTHROPIC_API_KEY".to_string(),
                "sk-ant-api03-STANDIN".to_string(),
            ),
            ("EXAMPLE_KEY".to_string(), "standin-2".to_string()),
        ];
        let (env, warnings) = agent_env(&vars, &stand_ins, &host);
        let get = |k: &str| env.iter().find(|(v, _)| v == k).map(|(_, v)| v.as_str());
        assert_eq!(get("ANTHROPIC_API_KEY"), Some("sk-ant-api03-STANDIN"));
        assert_eq!(get("EXAMPLE_KEY"), Some("standin-2"));
        assert_eq!(get("GH_TOKEN"), Some("ghp_0123456789abcdefghij0123"));
        assert_eq!(get("UNSET"), None);
        assert!(!format!("{env:?}").contains("REAL"));
        // One warning: the GitHub token handed as is; not the URL, not the stand-in.
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].starts_with("GH_TOKEN holds what looks like a GitHub token"));
        assert!(warnings[0].contains("from_env = \"GH_TOKEN\""));
        assert!(!warnings[0].contains("0123456789"), "never the value");
    }

    #[test]
    fn a_guard_without_its_secrets_gets_them_again_and_one_without_a_proxy_never() {
        let status = |armed| Response {
            ok: true,
            proxy_armed: armed,
            ..Default::default()
        };
        assert!(needs_secrets(&status(Some(false))));
        assert!(!needs_secrets(&status(Some(true))));
        assert!(!needs_secrets(&status(None)));
    }
}
