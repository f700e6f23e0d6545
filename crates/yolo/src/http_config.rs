//! The guard's HTTP settings for a session (issue 25): which hosts its proxy inspects and by
//! which rules, and the credentials it adds.
//!
//! Sources, in the order of their say:
//! - the user's config: `[http."HOST"]` (`allow`, `git_push`), `[firewall] inspect = "all"`, and
//!   the credentials (`credentials`), each of whose hosts is inspected;
//! - the repository's `customizations.yolo.http` (`{"HOST": ["GET /**"]}`): requests that may
//!   narrow what the user allows, never widen it (a host the user has no rules for keeps every
//!   request but those the repository leaves out).
//!
//! The result is public but for [`HttpSession::secrets`] (the real values), which go to the
//! guard over its control socket and nowhere else.

use crate::credentials::Credential;
use crate::error::{Error, Failure, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use yolo_protocol::allowlist::Pattern;
use yolo_protocol::http::{CredentialSpec, GitPush, HostRules, HttpConfig, HttpRule};

/// One `[http."HOST"]` section of the user's config.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct UserHttpHost {
    /// `METHOD /path-pattern` rules; the first that matches forwards, none refuses.
    pub(crate) allow: Option<Vec<String>>,
    /// Where git may push on this forge: the repository (default: the workspace's `origin`
    /// when it is on this host) and the refs (default `refs/heads/yolo/**`).
    pub(crate) git_push: Option<UserGitPush>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct UserGitPush {
    pub(crate) repository: Option<String>,
    pub(crate) refs: Option<Vec<String>>,
}

/// The workspace's `origin` on a forge: its host and repository path (`/owner/repo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) host: String,
    pub(crate) repository: String,
}

impl Origin {
    /// `origin`'s URL as git prints it (`https://github.com/o/r.git`, `git@github.com:o/r.git`,
    /// `ssh://git@github.com/o/r`): `None` for a local path or a URL without a repository.
    pub(crate) fn from_url(url: &str) -> Option<Origin> {
        let url = url.trim();
        let (host, path) = if let Some(rest) = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .or_else(|| url.strip_prefix("ssh://"))
            .or_else(|| url.strip_prefix("git://"))
        {
            let (authority, path) = rest.split_once('/')?;
            let host = authority.rsplit('@').next()?;
            let host = host.split(':').next()?;
            (host.to_string(), path.to_string())
        } else {
            // scp-like: [user@]host:path
            let (authority, path) = url.split_once(':')?;
            if authority.contains('/') {
                return None;
            }
            let host = authority.rsplit('@').next()?;
            (host.to_string(), path.to_string())
        };
        let path = path.trim_end_matches('/');
        let path = path.strip_suffix(".git").unwrap_or(path);
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        if host.is_empty() || parts.len() < 2 {
            return None;
        }
        Some(Origin {
            host: host.to_ascii_lowercase(),
            repository: format!("/{}", parts.join("/")),
        })
    }
}

/// What a session hands the guard's proxy.
pub(crate) struct HttpSession {
    /// The guard config's `http` (stand-ins, never real values).
    pub(crate) config: HttpConfig,
    /// `(variable, stand-in)` the agent gets in place of the real values.
    pub(crate) agent_env: Vec<(String, String)>,
    /// `(credential name, real value)`: for the guard's control socket only.
    pub(crate) secrets: Vec<(String, String)>,
}

impl std::fmt::Debug for HttpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSession")
            .field("config", &self.config)
            .field("agent_env", &self.agent_env)
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

/// Where the parts came from, for messages.
pub(crate) struct Sources<'a> {
    pub(crate) user_file: &'a Path,
    pub(crate) repo_file: &'a Path,
}

/// The session's HTTP settings (see the module doc). `random` fills a buffer with random
/// bytes (the stand-ins); `origin` is the workspace's, if any.
pub(crate) fn build(
    user: &BTreeMap<String, UserHttpHost>,
    inspect_all: bool,
    repo: &BTreeMap<String, Vec<String>>,
    credentials: &[Credential],
    origin: Option<&Origin>,
    sources: &Sources,
    random: &mut dyn FnMut(&mut [u8]) -> Result<()>,
) -> Result<HttpSession> {
    let user_err = |host: &str, message: String| Error::UserConfig {
        file: sources.user_file.to_path_buf(),
        message: format!("[http.\"{host}\"]: {message}"),
    };
    let mut hosts: Vec<HostRules> = Vec::new();
    for (host, section) in user {
        let pattern: Pattern = host.parse().map_err(|e| user_err(host, format!("{e}")))?;
        let allow = match &section.allow {
            Some(rules) => parse_rules(rules).map_err(|e| user_err(host, e))?,
            None => vec![any_request()],
        };
        let git_push = match &section.git_push {
            None => None,
            Some(push) => {
                let repository = push
                    .repository
                    .clone()
                    .or_else(|| {
                        origin
                            .filter(|o| o.host == host.to_ascii_lowercase())
                            .map(|o| o.repository.clone())
                    })
                    .ok_or_else(|| {
                        user_err(
                            host,
                            "`git_push` needs `repository` (\"/owner/repo\"): the workspace's origin is not on this host".into(),
                        )
                    })?;
                let mut rule = GitPush::new(&repository);
                if let Some(refs) = &push.refs {
                    rule.refs = refs.clone();
                }
                Some(rule)
            }
        };
        hosts.push(HostRules {
            host: pattern,
            allow,
            narrow: None,
            git_push,
        });
    }
    for (host, rules) in repo {
        let property = format!("customizations.yolo.http.{host}");
        let repo_err = |message: String| Error::Config {
            file: sources.repo_file.to_path_buf(),
            line: None,
            column: None,
            property: Some(property.clone()),
            message,
        };
        let pattern: Pattern = host.parse().map_err(|e| repo_err(format!("{e}")))?;
        let narrow = parse_rules(rules).map_err(repo_err)?;
        match hosts.iter_mut().find(|h| h.host == pattern) {
            Some(existing) => existing.narrow = Some(narrow),
            None => hosts.push(HostRules {
                host: pattern,
                allow: vec![any_request()],
                narrow: Some(narrow),
                git_push: None,
            }),
        }
    }
    let mut specs = Vec::new();
    let mut agent_env = Vec::new();
    let mut secrets = Vec::new();
    for credential in credentials {
        let mut bytes = vec![0u8; yolo_protocol::http::stand_in_random_len(&credential.real)];
        random(&mut bytes)?;
        let stand_in =
            yolo_protocol::http::stand_in_for(&credential.real, &bytes).ok_or_else(|| {
                Error::Failed {
                    what: Failure::SessionSecret,
                    cause: "too few random bytes for a stand-in".into(),
                }
            })?;
        let hosts = credential
            .hosts
            .iter()
            .map(|h| h.parse::<Pattern>())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::UserConfig {
                file: sources.user_file.to_path_buf(),
                message: format!("[credentials.{}] `hosts`: {e}", credential.name),
            })?;
        specs.push(CredentialSpec {
            name: credential.name.clone(),
            hosts,
            header: credential.header.clone(),
            value_prefix: credential.value_prefix.clone(),
            stand_in: stand_in.clone(),
        });
        if let Some(var) = &credential.agent_env {
            agent_env.push((var.clone(), stand_in));
        }
        secrets.push((credential.name.clone(), credential.real.clone()));
    }
    Ok(HttpSession {
        config: HttpConfig {
            inspect_all,
            hosts,
            credentials: specs,
        },
        agent_env,
        secrets,
    })
}

/// `* /**`: every request.
fn any_request() -> HttpRule {
    "* /**".parse().expect("a valid rule")
}

fn parse_rules(texts: &[String]) -> std::result::Result<Vec<HttpRule>, String> {
    texts
        .iter()
        .map(|t| t.parse::<HttpRule>().map_err(|e| e.to_string()))
        .collect()
}

/// The host's randomness.
pub(crate) fn os_random(buf: &mut [u8]) -> Result<()> {
    getrandom::fill(buf).map_err(|e| Error::Failed {
        what: Failure::SessionSecret,
        cause: format!("cannot read random bytes for a credential's stand-in: {e}").into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources() -> Sources<'static> {
        Sources {
            user_file: Path::new("config.toml"),
            repo_file: Path::new("devcontainer.json"),
        }
    }

    fn credential(name: &str, real: &str, var: Option<&str>) -> Credential {
        Credential {
            name: name.into(),
            hosts: vec!["api.example.test".into()],
            header: "x-api-key".into(),
            value_prefix: String::new(),
            agent_env: var.map(str::to_string),
            real: real.into(),
        }
    }

    fn user(text: &str) -> BTreeMap<String, UserHttpHost> {
        #[derive(Deserialize)]
        struct Doc {
            http: BTreeMap<String, UserHttpHost>,
        }
        toml::from_str::<Doc>(text).unwrap().http
    }

    #[test]
    fn origins_are_read_from_every_url_form_git_prints() {
        let want = Some(Origin {
            host: "github.com".into(),
            repository: "/o/r".into(),
        });
        for url in [
            "https://github.com/o/r.git",
            "https://user:tok@GitHub.com/o/r",
            "git@github.com:o/r.git",
            "ssh://git@github.com:22/o/r/",
        ] {
            assert_eq!(Origin::from_url(url), want, "{url}");
        }
        assert_eq!(Origin::from_url("/srv/git/r.git"), None);
        assert_eq!(Origin::from_url("https://github.com/"), None);
    }

    #[test]
    fn the_agent_gets_stand_ins_shaped_like_the_real_values_and_the_guard_the_real_ones() {
        let creds = [credential(
            "k",
            "sk-ant-api03-REALREALREALREALREALREAL",
            Some("K"),
        )];
        let mut n = 0u8;
        let mut random = |buf: &mut [u8]| {
            for b in buf.iter_mut() {
                n = n.wrapping_add(37);
                *b = n;
            }
            Ok(())
        };
        let got = build(
            &BTreeMap::new(),
            false,
            &BTreeMap::new(),
            &creds,
            None,
            &sources(),
            &mut random,
        )
        .unwrap();
        let (var, stand_in) = &got.agent_env[0];
        assert_eq!(var, "K");
        assert!(stand_in.starts_with("sk-ant-api03-"), "{stand_in}");
        assert!(!stand_in.contains("REAL"));
        assert_eq!(got.config.credentials[0].stand_in, *stand_in);
        assert_eq!(got.secrets, [("k".to_string(), creds[0].real.clone())]);
        assert!(got.config.inspects("api.example.test"));
        // Nothing a guard config file or a Debug print holds has the real value.
        let public = format!("{:?} {}", got, serde_json::to_string(&got.config).unwrap());
        assert!(!public.contains("REALREAL"), "{public}");
    }

    #[test]
    fn user_rules_and_git_push_take_origin_and_the_repository_only_narrows() {
        let origin = Origin {
            host: "github.com".into(),
            repository: "/me/proj".into(),
        };
        let user = user(
            "[http.\"github.com\"]\ngit_push = {}\n[http.\"api.example.test\"]\nallow = [\"GET /**\", \"POST /v1/messages\"]\n",
        );
        let repo: BTreeMap<String, Vec<String>> = [
            (
                "api.example.test".to_string(),
                vec!["GET /v1/**".to_string()],
            ),
            ("docs.example.test".to_string(), vec!["GET /**".to_string()]),
        ]
        .into();
        let got = build(
            &user,
            false,
            &repo,
            &[],
            Some(&origin),
            &sources(),
            &mut os_random,
        )
        .unwrap();
        let hosts = &got.config.hosts;
        let gh = hosts
            .iter()
            .find(|h| h.host.to_string() == "github.com")
            .unwrap();
        assert_eq!(gh.git_push.as_ref().unwrap().repository, "/me/proj");
        assert_eq!(gh.allow, [any_request()]);
        let api = hosts
            .iter()
            .find(|h| h.host.to_string() == "api.example.test")
            .unwrap();
        assert_eq!(api.allow.len(), 2);
        assert_eq!(api.narrow.as_ref().unwrap().len(), 1);
        let docs = hosts
            .iter()
            .find(|h| h.host.to_string() == "docs.example.test")
            .unwrap();
        assert_eq!(docs.allow, [any_request()]);
        assert!(docs.narrow.is_some());
    }

    #[test]
    fn bad_rules_name_their_file_and_property() {
        let bad_user = user("[http.\"a.test\"]\nallow = [\"GET nope\"]\n");
        let err = build(
            &bad_user,
            false,
            &BTreeMap::new(),
            &[],
            None,
            &sources(),
            &mut os_random,
        )
        .unwrap_err();
        assert_eq!(err.code(), 65);
        assert!(err.to_string().contains("[http.\"a.test\"]"), "{err}");
        let repo: BTreeMap<String, Vec<String>> =
            [("a.test".to_string(), vec!["FETCH".to_string()])].into();
        let err = build(
            &BTreeMap::new(),
            false,
            &repo,
            &[],
            None,
            &sources(),
            &mut os_random,
        )
        .unwrap_err();
        assert_eq!(err.code(), 65);
        assert!(
            err.to_string().contains("customizations.yolo.http.a.test"),
            "{err}"
        );
        let push = user("[http.\"gitlab.test\"]\ngit_push = {}\n");
        let err = build(
            &push,
            false,
            &BTreeMap::new(),
            &[],
            None,
            &sources(),
            &mut os_random,
        )
        .unwrap_err();
        assert!(err.to_string().contains("needs `repository`"), "{err}");
    }
}
