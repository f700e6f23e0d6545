//! Fetch a Feature published as an OCI artifact, through the OCI distribution API, with
//! `oci-client` (the OCI distribution client of the wasmtime/Krustlet people, used by several
//! container tools): it speaks the token (WWW-Authenticate Bearer) and Basic flows registries
//! use, and verifies manifest and blob digests. Registries on loopback are spoken to over
//! plain http, every other over https.
//!
//! Credentials come from the user's Docker config as the docker CLI reads it
//! (`$DOCKER_CONFIG/config.json` or `~/.docker/config.json`: `auths`, `credHelpers`,
//! `credsStore` through `docker-credential-<name> get`), with the `docker_credential` crate.
//! No credentials means an anonymous pull, as with the reference CLI.
//!
//! A manifest pinned by digest (the lock file's `integrity`, or `@sha256:` in the reference)
//! whose manifest and layer are in the cache is not fetched again: no network at all.

use super::cache::{self, Cache};
use super::reference::OciRef;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use std::path::{Path, PathBuf};

pub(crate) const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub(crate) const CONFIG_MEDIA_TYPE: &str = "application/vnd.devcontainers";
pub(crate) const LAYER_MEDIA_TYPE: &str = "application/vnd.devcontainers.layer.v1+tar";

/// What fetching an OCI Feature gave.
pub(crate) struct Fetched {
    /// The manifest's digest: the lock file's `integrity`.
    pub(crate) manifest_digest: String,
    /// The extracted layer.
    pub(crate) dir: std::path::PathBuf,
    /// Bytes downloaded (0 when everything came from the cache).
    pub(crate) bytes: u64,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    config: Descriptor,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    #[serde(default)]
    size: u64,
}

/// Larger than any Feature; a bound so a wrong or hostile registry cannot fill memory.
const MAX_LAYER: u64 = 512 << 20;

/// Fetch `oci`; `pin` is the manifest digest it must have (from the lock file), if any.
pub(crate) async fn fetch(
    oci: &OciRef,
    pin: Option<&str>,
    cache: &Cache,
    docker_config: Option<&Path>,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Fetched, String> {
    let pin = pin.or(oci.digest.as_deref());
    if let Some(pin) = pin {
        if let Some(manifest) = cache.manifest(pin) {
            let (layer, _) = layer_of(&manifest)?;
            if let Some(dir) = cache.extracted(&layer) {
                progress(&format!("{oci}: cached ({pin})"));
                return Ok(Fetched {
                    manifest_digest: pin.to_string(),
                    dir,
                    bytes: 0,
                });
            }
        }
    }
    progress(&format!("fetching {oci}"));
    let client = client(oci);
    let auth = credentials(&oci.registry, docker_config);
    let reference = match pin {
        Some(pin) => Reference::with_digest(oci.registry.clone(), oci.path(), pin.to_string()),
        None => Reference::with_tag(oci.registry.clone(), oci.path(), oci.version().to_string()),
    };
    let (manifest, digest) = client
        .pull_manifest_raw(&reference, &auth, &[MANIFEST_MEDIA_TYPE])
        .await
        .map_err(|e| explain(oci, pin, e))?;
    // oci-client checks the body against the registry's digest header and a digest
    // reference; check the pin here too, whatever the registry says.
    let computed = cache::sha256(&manifest);
    if let Some(pin) = pin {
        if computed != pin {
            return Err(format!(
                "the registry sent a manifest with digest {computed}, but {pin} was asked for \
                 (pinned by the reference or devcontainer-lock.json); refusing it"
            ));
        }
    }
    if digest != computed {
        return Err(format!(
            "the registry said the manifest's digest is {digest}, but it is {computed}; refusing it"
        ));
    }
    let (layer, size) = layer_of(&manifest)?;
    let mut bytes = manifest.len() as u64;
    let dir = match cache.extracted(&layer) {
        Some(dir) => dir,
        None => {
            if size > MAX_LAYER {
                return Err(format!(
                    "its layer is {size} bytes, more than any Feature ({} MiB); refusing it",
                    MAX_LAYER >> 20
                ));
            }
            let mut blob = Capped {
                bytes: Vec::new(),
                // The manifest's size, when it gives one, is what the digest covers.
                limit: if size > 0 { size } else { MAX_LAYER },
            };
            client
                .pull_blob(&reference, layer.as_str(), &mut blob)
                .await
                .map_err(|e| explain(oci, None, e))?;
            let blob = blob.bytes;
            if cache::sha256(&blob) != layer {
                return Err(format!(
                    "the registry sent a layer whose digest is not {layer}; refusing it"
                ));
            }
            bytes += blob.len() as u64;
            cache
                .put_blob(&layer, &blob)
                .map_err(|e| format!("cannot unpack its layer: {e}"))?
        }
    };
    cache
        .put_manifest(&computed, &manifest)
        .map_err(|e| format!("cannot store it in the cache: {e}"))?;
    progress(&format!("fetched {oci} ({computed}, {bytes} bytes)"));
    Ok(Fetched {
        manifest_digest: computed,
        dir,
        bytes,
    })
}

/// A buffer that refuses to grow past `limit`.
struct Capped {
    bytes: Vec<u8>,
    limit: u64,
}

impl tokio::io::AsyncWrite for Capped {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if (this.bytes.len() + buf.len()) as u64 > this.limit {
            return std::task::Poll::Ready(Err(std::io::Error::other(format!(
                "the layer is larger than the {} bytes its manifest gives",
                this.limit
            ))));
        }
        this.bytes.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// The digest and size of the Feature layer a manifest names, after checking it is a
/// Feature's.
fn layer_of(manifest: &[u8]) -> Result<(String, u64), String> {
    let manifest: Manifest = serde_json::from_slice(manifest)
        .map_err(|e| format!("the registry's manifest is not an OCI image manifest: {e}"))?;
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(format!(
            "this is not a Dev Container Feature (its config is of media type {}, not {CONFIG_MEDIA_TYPE})",
            manifest.config.media_type
        ));
    }
    let layer = manifest
        .layers
        .iter()
        .find(|l| l.media_type == LAYER_MEDIA_TYPE)
        .ok_or_else(|| format!("the manifest has no layer of media type {LAYER_MEDIA_TYPE}"))?;
    if cache::hex_of(&layer.digest).is_none() {
        return Err(format!(
            "the layer's digest {} is not a sha256 digest",
            layer.digest
        ));
    }
    Ok((layer.digest.clone(), layer.size))
}

fn client(oci: &OciRef) -> Client {
    let protocol = if oci.plain_http() {
        ClientProtocol::Http
    } else {
        ClientProtocol::Https
    };
    Client::new(ClientConfig {
        protocol,
        connect_timeout: Some(std::time::Duration::from_secs(15)),
        read_timeout: Some(std::time::Duration::from_secs(60)),
        user_agent: concat!("yolo/", env!("CARGO_PKG_VERSION")),
        ..Default::default()
    })
}

/// The user's credentials for `registry` from the Docker config (`docker_config`, else
/// `$DOCKER_CONFIG`, else `~/.docker`, as the docker CLI), or anonymous.
fn credentials(registry: &str, docker_config: Option<&Path>) -> RegistryAuth {
    let dir = docker_config
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("DOCKER_CONFIG").map(PathBuf::from))
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker")));
    let Some(file) = dir.and_then(|dir| std::fs::File::open(dir.join("config.json")).ok()) else {
        return RegistryAuth::Anonymous;
    };
    match docker_credential::get_credential_from_reader(std::io::BufReader::new(file), registry) {
        Ok(docker_credential::DockerCredential::UsernamePassword(user, password)) => {
            RegistryAuth::Basic(user, password)
        }
        // An identity token is an OAuth refresh token (Azure); oci-client cannot trade it.
        Ok(docker_credential::DockerCredential::IdentityToken(_)) | Err(_) => {
            RegistryAuth::Anonymous
        }
    }
}

fn explain(
    oci: &OciRef,
    pin: Option<&str>,
    error: oci_client::errors::OciDistributionError,
) -> String {
    use oci_client::errors::OciDistributionError as E;
    let registry = &oci.registry;
    match &error {
        E::DigestError(_) => {
            format!("{registry} sent content that does not match its digest; refusing it ({error})")
        }
        E::RegistryError { envelope, .. }
            if pin.is_some()
                && envelope
                    .errors
                    .iter()
                    .any(|e| e.code == oci_client::errors::OciErrorCode::ManifestUnknown) =>
        {
            format!(
                "{registry} has no manifest {} for {}, the digest devcontainer-lock.json (or \
                 the reference) pins; if the Feature was republished on purpose, delete its \
                 entry from devcontainer-lock.json ({error})",
                pin.unwrap_or_default(),
                oci.resource()
            )
        }
        E::UnauthorizedError { .. } | E::AuthenticationFailure(_) => format!(
            "{registry} refused access ({error}); log in with `docker login {registry}` \
             (yolo reads the Docker config and its credential helpers)"
        ),
        E::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|e| {
                matches!(
                    e.code,
                    oci_client::errors::OciErrorCode::ManifestUnknown
                        | oci_client::errors::OciErrorCode::NameUnknown
                )
            }) =>
        {
            format!("{registry} has no {oci}: check the name and the tag ({error})")
        }
        E::RequestError(e) if e.is_connect() || e.is_timeout() => format!(
            "cannot reach the registry {registry} ({}); check the network, or pin the Feature \
             in devcontainer-lock.json so the cached copy is used",
            crate::error::with_sources(e)
        ),
        E::RequestError(e) => format!(
            "request to {registry} failed: {}",
            crate::error::with_sources(e)
        ),
        _ => format!("{registry}: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_layer_cannot_outgrow_its_manifest_size() {
        let mut capped = Capped {
            bytes: Vec::new(),
            limit: 4,
        };
        capped.write_all(b"abcd").await.unwrap();
        assert!(capped.write_all(b"e").await.is_err());
        assert_eq!(capped.bytes, b"abcd");
    }

    #[test]
    fn only_feature_manifests_are_taken() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let manifest = |config: &str, layer: &str| {
            serde_json::json!({
                "schemaVersion": 2,
                "config": {"mediaType": config, "digest": digest, "size": 2},
                "layers": [{"mediaType": layer, "digest": digest, "size": 10}]
            })
            .to_string()
        };
        assert_eq!(
            layer_of(manifest(CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE).as_bytes()).unwrap(),
            (digest.clone(), 10)
        );
        let err = layer_of(
            manifest("application/vnd.oci.image.config.v1+json", LAYER_MEDIA_TYPE).as_bytes(),
        )
        .unwrap_err();
        assert!(err.contains("not a Dev Container Feature"), "{err}");
        let err =
            layer_of(manifest(CONFIG_MEDIA_TYPE, "application/x-tar").as_bytes()).unwrap_err();
        assert!(err.contains("no layer of media type"), "{err}");
    }
}
