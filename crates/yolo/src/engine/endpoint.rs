//! Which Docker Engine to talk to, chosen as the docker CLI chooses: `DOCKER_HOST`, else the
//! context named by `DOCKER_CONTEXT`, else the `currentContext` of `$DOCKER_CONFIG/config.json`
//! (default `~/.docker`), else the local socket. A context is read from the CLI's own store
//! (`contexts/meta/<sha256 of the name>/meta.json`, its `Endpoints.docker.Host`, and TLS files
//! under `contexts/tls/<same>/docker/`). Written by hand: the store is two small JSON files and
//! no maintained crate reads it.
//!
//! Only the choice is made here, from values (`Environment`) so it is tested without Docker;
//! `Engine::connect` connects to it.

use crate::error::{Cause, Dependency, Error, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

pub(super) const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// What the choice reads: the three variables and the CLI's config folder.
pub(super) struct Environment {
    pub(super) docker_host: Option<String>,
    pub(super) docker_context: Option<String>,
    pub(super) tls_verify: bool,
    pub(super) cert_path: Option<PathBuf>,
    /// `$DOCKER_CONFIG`, else `~/.docker`.
    pub(super) config_dir: Option<PathBuf>,
}

impl Environment {
    pub(super) fn from_process() -> Environment {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let config_dir = var("DOCKER_CONFIG")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker")));
        Environment {
            docker_host: var("DOCKER_HOST"),
            docker_context: var("DOCKER_CONTEXT"),
            tls_verify: var("DOCKER_TLS_VERIFY").is_some(),
            cert_path: var("DOCKER_CERT_PATH").map(PathBuf::from),
            config_dir,
        }
    }
}

/// The engine to connect to and where that choice came from (for messages).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Endpoint {
    pub(super) host: String,
    /// The folder holding `ca.pem`, `cert.pem` and `key.pem`, when the connection is TLS.
    pub(super) tls: Option<PathBuf>,
    /// "DOCKER_HOST", "the Docker context \"x\"" or "the default socket".
    pub(super) source: String,
}

impl Endpoint {
    pub(super) fn choose(env: &Environment) -> Result<Endpoint> {
        let default_certs = || {
            env.cert_path
                .clone()
                .or_else(|| env.config_dir.clone())
                .unwrap_or_else(|| PathBuf::from(".docker"))
        };
        if let Some(host) = &env.docker_host {
            return Ok(Endpoint {
                host: host.clone(),
                tls: env.tls_verify.then(default_certs),
                source: "DOCKER_HOST".into(),
            });
        }
        let context = match &env.docker_context {
            Some(name) => Some(name.clone()),
            None => current_context(env.config_dir.as_deref())?,
        };
        match context {
            Some(name) if name != "default" => {
                let Some(dir) = &env.config_dir else {
                    return Err(no_context(&name, Path::new("~/.docker")));
                };
                read_context(dir, &name)
            }
            _ => Ok(Endpoint {
                host: DEFAULT_HOST.into(),
                tls: None,
                source: "the default socket".into(),
            }),
        }
    }
}

/// `currentContext` of `config.json`; a missing file or key is no context.
fn current_context(config_dir: Option<&Path>) -> Result<Option<String>> {
    let Some(dir) = config_dir else {
        return Ok(None);
    };
    let path = dir.join("config.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Error::dependency(
            Dependency::DockerContext,
            Cause::around(
                format!("{}: not valid JSON (", path.display()),
                e,
                "); the docker CLI cannot read it either",
            ),
        )
    })?;
    Ok(value["currentContext"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string))
}

fn read_context(config_dir: &Path, name: &str) -> Result<Endpoint> {
    let id = hex(&Sha256::digest(name.as_bytes()));
    let meta = config_dir.join("contexts/meta").join(&id).join("meta.json");
    let text = std::fs::read_to_string(&meta).map_err(|_| no_context(name, config_dir))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Error::dependency(
            Dependency::DockerContext,
            Cause::of(
                format!(
                    "the Docker context \"{name}\" ({}) is not valid JSON",
                    meta.display()
                ),
                e,
            ),
        )
    })?;
    let docker = &value["Endpoints"]["docker"];
    let host = docker["Host"]
        .as_str()
        .filter(|h| !h.is_empty())
        .unwrap_or(DEFAULT_HOST);
    let tls = config_dir.join("contexts/tls").join(&id).join("docker");
    Ok(Endpoint {
        host: host.to_string(),
        tls: tls.join("ca.pem").is_file().then_some(tls),
        source: format!("the Docker context \"{name}\""),
    })
}

fn no_context(name: &str, config_dir: &Path) -> Error {
    Error::NotRunning(format!(
        "the Docker context \"{name}\" does not exist in {} (chosen by DOCKER_CONTEXT or `docker context use`); list them with `docker context ls`",
        config_dir.display()
    ))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(dir: &Path) -> Environment {
        Environment {
            docker_host: None,
            docker_context: None,
            tls_verify: false,
            cert_path: None,
            config_dir: Some(dir.to_path_buf()),
        }
    }

    fn context(dir: &Path, name: &str, host: &str) {
        let id = hex(&Sha256::digest(name.as_bytes()));
        let meta = dir.join("contexts/meta").join(id);
        std::fs::create_dir_all(&meta).unwrap();
        let json = serde_json::json!({"Name": name, "Metadata": {},
            "Endpoints": {"docker": {"Host": host, "SkipTLSVerify": false}}});
        std::fs::write(meta.join("meta.json"), json.to_string()).unwrap();
    }

    #[test]
    fn the_context_store_is_found_by_the_sha256_of_the_name() {
        // The folder name the docker CLI uses for a context called "remote".
        assert_eq!(
            hex(&Sha256::digest(b"remote")),
            "b71199ebd070b36beab7317920c2c2f1d777df8d05e5527d8458fda57cb17a7a"
        );
        let dir = tempfile::tempdir().unwrap();
        context(dir.path(), "remote", "tcp://10.0.0.1:2375");
        std::fs::write(
            dir.path().join("config.json"),
            r#"{"currentContext": "remote"}"#,
        )
        .unwrap();
        let chosen = Endpoint::choose(&env(dir.path())).unwrap();
        assert_eq!(chosen.host, "tcp://10.0.0.1:2375");
        assert_eq!(chosen.source, "the Docker context \"remote\"");
        assert_eq!(chosen.tls, None);
    }

    #[test]
    fn docker_host_wins_over_docker_context_which_wins_over_the_config() {
        let dir = tempfile::tempdir().unwrap();
        context(dir.path(), "a", "unix:///a.sock");
        context(dir.path(), "b", "unix:///b.sock");
        std::fs::write(dir.path().join("config.json"), r#"{"currentContext": "a"}"#).unwrap();
        let mut e = env(dir.path());
        e.docker_context = Some("b".into());
        assert_eq!(Endpoint::choose(&e).unwrap().host, "unix:///b.sock");
        e.docker_host = Some("unix:///c.sock".into());
        let chosen = Endpoint::choose(&e).unwrap();
        assert_eq!(
            (chosen.host.as_str(), chosen.source.as_str()),
            ("unix:///c.sock", "DOCKER_HOST")
        );
        e.docker_context = Some("default".into());
        e.docker_host = None;
        assert_eq!(Endpoint::choose(&e).unwrap().host, DEFAULT_HOST);
    }

    #[test]
    fn no_config_is_the_default_socket_and_a_missing_context_is_named() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            Endpoint::choose(&env(dir.path())).unwrap().host,
            DEFAULT_HOST
        );
        let mut e = env(dir.path());
        e.docker_context = Some("gone".into());
        let message = Endpoint::choose(&e).unwrap_err().to_string();
        assert!(message.contains("\"gone\" does not exist"), "{message}");
    }

    #[test]
    fn tls_comes_from_docker_tls_verify_or_the_context_store() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = env(dir.path());
        e.docker_host = Some("tcp://h:2376".into());
        e.tls_verify = true;
        assert_eq!(
            Endpoint::choose(&e).unwrap().tls,
            Some(dir.path().to_path_buf())
        );
        e.cert_path = Some("/certs".into());
        assert_eq!(
            Endpoint::choose(&e).unwrap().tls,
            Some(PathBuf::from("/certs"))
        );

        context(dir.path(), "secure", "tcp://h:2376");
        let id = hex(&Sha256::digest(b"secure"));
        let tls = dir.path().join("contexts/tls").join(id).join("docker");
        std::fs::create_dir_all(&tls).unwrap();
        std::fs::write(tls.join("ca.pem"), "x").unwrap();
        let mut e = env(dir.path());
        e.docker_context = Some("secure".into());
        assert_eq!(Endpoint::choose(&e).unwrap().tls, Some(tls));
    }
}
