//! What a key of `features` (or of a Feature's `dependsOn`/`installsAfter`) names: a local folder,
//! an OCI artifact, or a tarball URL. Parsing follows the reference CLI (`getFeatureIdType`,
//! `getRef`): the reference is lower-cased, a tag defaults to `latest`, a digest must be sha256.
//! Pure: nothing is fetched here.

use std::fmt;

/// A Feature reference, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// `./name` or `./sub/name`, relative to the folder of devcontainer.json.
    Local { path: String },
    /// `registry/namespace/id[:tag|@sha256:...]`.
    Oci(OciRef),
    /// `https://host/path/devcontainer-feature-<id>.tgz` (plain http only on loopback).
    Tarball { url: String, id: String },
}

/// An OCI reference as the reference CLI's `OCIRef`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OciRef {
    /// `ghcr.io`, `127.0.0.1:5000`.
    pub(crate) registry: String,
    /// `devcontainers/features`.
    pub(crate) namespace: String,
    /// `node`.
    pub(crate) id: String,
    /// `1` (`latest` when none was given); `None` with a digest.
    pub(crate) tag: Option<String>,
    /// `sha256:...` when pinned by digest.
    pub(crate) digest: Option<String>,
}

impl OciRef {
    /// `devcontainers/features/node`: the repository on the registry.
    pub(crate) fn path(&self) -> String {
        format!("{}/{}", self.namespace, self.id)
    }

    /// `ghcr.io/devcontainers/features/node`.
    pub(crate) fn resource(&self) -> String {
        format!("{}/{}", self.registry, self.path())
    }

    /// `ghcr.io/devcontainers/features`: what a legacy id is resolved against.
    pub(crate) fn prefix(&self) -> String {
        format!("{}/{}", self.registry, self.namespace)
    }

    /// The tag or digest the manifest is asked for.
    pub(crate) fn version(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// Registries on loopback are spoken to over plain http (a local test or mirror registry);
    /// every other one over https.
    pub(crate) fn plain_http(&self) -> bool {
        is_loopback_host(host_of(&self.registry))
    }
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.digest, &self.tag) {
            (Some(digest), _) => write!(f, "{}@{digest}", self.resource()),
            (None, Some(tag)) => write!(f, "{}:{tag}", self.resource()),
            (None, None) => write!(f, "{}", self.resource()),
        }
    }
}

/// `host` of `host:port` (an IPv6 literal in brackets keeps its brackets off).
fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    authority.split(':').next().unwrap_or(authority)
}

/// A host on this machine or its local networks: `localhost` (and `*.localhost`), or an
/// address that is loopback, unspecified, link-local (169.254/16: where clouds serve instance
/// credentials; fe80::/10), private (10/8, 172.16/12, 192.168/16, fc00::/7) or shared
/// (100.64/10). The host fetches Features itself, so a repository naming one would make the
/// user's machine send requests to its own or its network's services.
pub(crate) fn is_local_host(host: &str) -> bool {
    use std::net::IpAddr;
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    let Ok(ip) = host.parse::<IpAddr>() else {
        return false;
    };
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_unspecified()
                || v4.is_link_local()
                || v4.is_private()
                || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_local_host(&v4.to_string());
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xffc0) == 0xfe80
                || (first & 0xfe00) == 0xfc00
        }
    }
}

/// The `host` and `host:port` a source is fetched from: an OCI registry, or a tarball URL's
/// authority; none for a local folder.
pub(crate) fn fetched_from(source: &Source) -> Option<(String, String)> {
    let authority = match source {
        Source::Local { .. } => return None,
        Source::Oci(oci) => oci.registry.clone(),
        Source::Tarball { url, .. } => {
            let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
            let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
            authority
                .rsplit_once('@')
                .map_or(authority, |(_, a)| a)
                .to_string()
        }
    };
    Some((host_of(&authority).to_string(), authority))
}

pub(crate) fn is_loopback_host(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .map(|ip| ip.is_loopback())
            .unwrap_or(false)
}

/// The reference CLI's mapping of the old short ids (from microsoft/vscode-dev-containers) to
/// the Features that replaced them, pinned to major version 1 as it does: `Some((reference,
/// warning))` for an id it maps.
pub(crate) fn legacy_mapping(key: &str) -> Option<(String, String)> {
    const MIGRATED: &[&str] = &[
        "aws-cli",
        "azure-cli",
        "desktop-lite",
        "docker-in-docker",
        "docker-from-docker",
        "dotnet",
        "git",
        "git-lfs",
        "github-cli",
        "java",
        "kubectl-helm-minikube",
        "node",
        "powershell",
        "python",
        "ruby",
        "rust",
        "sshd",
        "terraform",
    ];
    let id = match key {
        "golang" => "go",
        "common" => "common-utils",
        id if MIGRATED.contains(&id) => id,
        _ => return None,
    };
    let reference = format!("ghcr.io/devcontainers/features/{id}:1");
    let warning = format!(
        "\"{key}\" is a deprecated short id; it stands for {reference} (write that instead, \
         see https://github.com/devcontainers/features/tree/main/src/{id})"
    );
    Some((reference, warning))
}

/// Parse a reference; the error says what is wrong and what to write instead.
pub(crate) fn parse(key: &str) -> Result<Source, String> {
    if key.starts_with("https://") || key.starts_with("http://") {
        return parse_tarball(key);
    }
    if key.starts_with("./") || key.starts_with("../") || key.starts_with('/') {
        if key.starts_with('/') {
            return Err(
                "an absolute path is not allowed for a local Feature; put the Feature \
                 in a folder under .devcontainer/ and reference it as \"./<folder>\""
                    .into(),
            );
        }
        return Ok(Source::Local {
            path: key.to_string(),
        });
    }
    if !key.contains('/') && !key.contains('\\') {
        return Err(format!(
            "\"{key}\" is a legacy Feature id, which is not supported; use an OCI reference \
             (see https://containers.dev/features, e.g. ghcr.io/devcontainers/features/{key}:1), \
             or \"./{key}\" for a Feature folder under .devcontainer/"
        ));
    }
    parse_oci(key)
}

fn parse_tarball(key: &str) -> Result<Source, String> {
    let (scheme, rest) = key.split_once("://").unwrap_or(("", key));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host_of(authority.rsplit('@').next().unwrap_or(authority));
    if scheme == "http" && !is_loopback_host(host) {
        return Err(format!(
            "a Feature tarball must be fetched over https, not plain http (only a loopback \
             address may use http); write https://{rest}"
        ));
    }
    let path = rest[authority.len()..]
        .split(['?', '#'])
        .next()
        .unwrap_or("");
    let name = path.rsplit('/').next().unwrap_or("");
    let id = name
        .strip_prefix("devcontainer-feature-")
        .and_then(|n| n.strip_suffix(".tgz"))
        .unwrap_or("");
    if id.is_empty() || !is_feature_id(id) {
        return Err(format!(
            "a Feature tarball's file name must be devcontainer-feature-<id>.tgz (id of \
             letters, digits, '-' or '_'), not \"{name}\""
        ));
    }
    Ok(Source::Tarball {
        url: key.to_string(),
        id: id.to_string(),
    })
}

/// The spec's feature id: alphanumerics, `-` and `_`.
pub(crate) fn is_feature_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn parse_oci(key: &str) -> Result<Source, String> {
    let input = key.to_lowercase();
    if input.starts_with('.') {
        return Err("a Feature reference must not start with '.'".into());
    }
    let first = input.split('/').next().unwrap_or("");
    if !first.contains('.') && !first.starts_with("localhost") {
        return Err(format!(
            "\"{first}\" is not a registry host: write <registry>/<namespace>/<id>[:tag], \
             e.g. ghcr.io/devcontainers/features/node:1 (the GitHub-release shorthand \
             owner/repo/id is deprecated and not supported)"
        ));
    }
    let last_slash = input.rfind('/').unwrap_or(0);
    let (resource, tag, digest) = if let Some(at) = input.rfind('@') {
        let digest = &input[at + 1..];
        match digest.split_once(':') {
            Some(("sha256", hex))
                if hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()) => {}
            _ => {
                return Err(format!(
                    "\"{digest}\" is not a valid digest; write @sha256:<64 hex digits>"
                ))
            }
        }
        (&input[..at], None, Some(digest.to_string()))
    } else if let Some(colon) = input.rfind(':').filter(|&c| c > last_slash) {
        (&input[..colon], Some(input[colon + 1..].to_string()), None)
    } else {
        (input.as_str(), Some("latest".to_string()), None)
    };
    if let Some(tag) = &tag {
        let valid = !tag.is_empty()
            && tag.len() <= 128
            && !tag.starts_with(['.', '-'])
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !valid {
            return Err(format!(
                "\"{tag}\" is not a valid tag (letters, digits, '.', '_', '-'; at most 128)"
            ));
        }
    }
    let parts: Vec<&str> = resource.split('/').collect();
    if parts.len() < 3 {
        return Err(format!(
            "\"{key}\" is not a Feature reference: write <registry>/<namespace>/<id>[:tag], \
             e.g. ghcr.io/devcontainers/features/node:1 (GitHub-release shorthand \
             owner/repo/id is deprecated and not supported)"
        ));
    }
    let registry = parts[0].to_string();
    let mut namespace: Vec<String> = parts[1..parts.len() - 1]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if namespace.first().map(String::as_str) == Some("devcontainers-contrib") {
        namespace[0] = "devcontainers-extra".into();
    }
    let id = parts[parts.len() - 1].to_string();
    let namespace = namespace.join("/");
    let path = format!("{namespace}/{id}");
    if !valid_path(&path) {
        return Err(format!(
            "\"{path}\" is not a valid repository path (lower-case letters and digits, \
             separated by '.', '_', '-' or '/')"
        ));
    }
    Ok(Source::Oci(OciRef {
        registry,
        namespace,
        id,
        tag,
        digest,
    }))
}

/// The distribution spec's repository name: `[a-z0-9]+([._-][a-z0-9]+)*(/...)*`.
fn valid_path(path: &str) -> bool {
    path.split('/').all(|component| {
        !component.is_empty()
            && component
                .split(['.', '_', '-'])
                .all(|run| !run.is_empty() && run.chars().all(|c| c.is_ascii_alphanumeric()))
    })
}

/// The reference without its tag or digest, as the reference CLI's
/// `getFeatureIdWithoutVersion` (for messages and the install banner).
#[allow(dead_code)] // for the install banner; not used by it yet
pub(crate) fn without_version(key: &str) -> &str {
    let tail_start = key.rfind('/').map(|i| i + 1).unwrap_or(0);
    match key[tail_start..].find([':', '@']) {
        Some(i) => &key[..tail_start + i],
        None => key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oci(key: &str) -> OciRef {
        match parse(key).unwrap() {
            Source::Oci(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn oci_references() {
        let r = oci("ghcr.io/devcontainers/features/node:1");
        assert_eq!(r.registry, "ghcr.io");
        assert_eq!(r.namespace, "devcontainers/features");
        assert_eq!(r.id, "node");
        assert_eq!(r.tag.as_deref(), Some("1"));
        assert_eq!(r.resource(), "ghcr.io/devcontainers/features/node");
        assert!(!r.plain_http());

        let r = oci("ghcr.io/devcontainers/features/node");
        assert_eq!(r.version(), "latest");

        let r = oci("127.0.0.1:5000/features/hello:1.2");
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.namespace, "features");
        assert_eq!(r.tag.as_deref(), Some("1.2"));
        assert!(r.plain_http());
        assert!(oci("localhost:5000/a/b").plain_http());

        let digest = format!("sha256:{}", "a".repeat(64));
        let r = oci(&format!("ghcr.io/A/B/C@{digest}"));
        assert_eq!(r.digest.as_deref(), Some(digest.as_str()));
        assert_eq!(r.tag, None);
        assert_eq!(r.path(), "a/b/c");

        let r = oci("ghcr.io/devcontainers-contrib/features/x:1");
        assert_eq!(r.namespace, "devcontainers-extra/features");
    }

    #[test]
    fn bad_references() {
        assert!(parse("node").unwrap_err().contains("legacy"));
        assert!(parse("/abs/path").unwrap_err().contains("absolute"));
        assert!(parse("owner/repo/id@v1").unwrap_err().contains("shorthand"));
        assert!(parse("ghcr.io/x/y@sha256:123")
            .unwrap_err()
            .contains("digest"));
        assert!(parse("ghcr.io/x/y:bad!tag").unwrap_err().contains("tag"));
        assert!(parse("http://example.com/devcontainer-feature-a.tgz")
            .unwrap_err()
            .contains("https"));
        assert!(parse("https://example.com/feature.tgz")
            .unwrap_err()
            .contains("devcontainer-feature-<id>.tgz"));
    }

    #[test]
    fn tarballs_and_local() {
        assert_eq!(
            parse("https://example.com/x/devcontainer-feature-hello.tgz").unwrap(),
            Source::Tarball {
                url: "https://example.com/x/devcontainer-feature-hello.tgz".into(),
                id: "hello".into()
            }
        );
        assert!(matches!(
            parse("http://127.0.0.1:8080/devcontainer-feature-a.tgz"),
            Ok(Source::Tarball { .. })
        ));
        assert_eq!(
            parse("./local").unwrap(),
            Source::Local {
                path: "./local".into()
            }
        );
    }

    #[test]
    fn legacy_short_ids_map_as_in_the_reference_cli() {
        let (reference, warning) = legacy_mapping("node").unwrap();
        assert_eq!(reference, "ghcr.io/devcontainers/features/node:1");
        assert!(warning.contains("deprecated"));
        assert_eq!(
            legacy_mapping("golang").unwrap().0,
            "ghcr.io/devcontainers/features/go:1"
        );
        assert_eq!(legacy_mapping("fish"), None);
        assert_eq!(
            legacy_mapping("ghcr.io/devcontainers/features/node:1"),
            None
        );
    }

    #[test]
    fn versions_are_stripped() {
        assert_eq!(without_version("ghcr.io/a/b/c:1"), "ghcr.io/a/b/c");
        assert_eq!(
            without_version("localhost:5000/a/c@sha256:00"),
            "localhost:5000/a/c"
        );
        assert_eq!(without_version("localhost:5000/a/c"), "localhost:5000/a/c");
        assert_eq!(without_version("./local"), "./local");
    }

    #[test]
    fn local_hosts_are_this_machine_and_its_private_networks() {
        for local in [
            "localhost",
            "api.localhost",
            "127.0.0.1",
            "127.8.9.1",
            "0.0.0.0",
            "169.254.169.254",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "LOCALHOST.",
        ] {
            assert!(is_local_host(local), "{local}");
        }
        for public in [
            "ghcr.io",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2001:db8::1",
            "localhost.example",
        ] {
            assert!(!is_local_host(public), "{public}");
        }
        let tarball = parse("https://user@10.0.0.5:8443/f/devcontainer-feature-a.tgz").unwrap();
        assert_eq!(
            fetched_from(&tarball),
            Some(("10.0.0.5".to_string(), "10.0.0.5:8443".to_string()))
        );
        let oci = parse("localhost:5000/features/a:1").unwrap();
        assert_eq!(
            fetched_from(&oci),
            Some(("localhost".to_string(), "localhost:5000".to_string()))
        );
    }
}
