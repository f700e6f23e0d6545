//! Fetch a Feature given as a tarball URL (`https://.../devcontainer-feature-<id>.tgz`; plain
//! http only on loopback, which `reference` enforces) with `reqwest` (rustls, the client
//! `oci-client` already brings). Its sha256 is the lock file's `integrity`: with a pin whose
//! tarball is cached, nothing is fetched.

use super::cache::{self, Cache};

pub(crate) struct Fetched {
    pub(crate) digest: String,
    pub(crate) dir: std::path::PathBuf,
    pub(crate) bytes: u64,
}

/// Larger than any Feature; a bound so a wrong URL cannot fill the disk.
const MAX_BYTES: usize = 512 << 20;

pub(crate) async fn fetch(
    url: &str,
    pin: Option<&str>,
    cache: &Cache,
    local: &super::LocalSources,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Fetched, String> {
    if let Some(pin) = pin {
        if let Some(dir) = cache.extracted(pin) {
            progress(&format!("{url}: cached ({pin})"));
            return Ok(Fetched {
                digest: pin.to_string(),
                dir,
                bytes: 0,
            });
        }
    }
    progress(&format!("fetching {url}"));
    let client = reqwest::Client::builder()
        .user_agent(concat!("yolo/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(std::time::Duration::from_secs(15))
        .read_timeout(std::time::Duration::from_secs(60))
        .https_only(!url.starts_with("http://"))
        .redirect(redirects(local.clone()))
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
    let mut response = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("cannot fetch it: {}", crate::error::with_sources(&e)))?;
    if !response.status().is_success() {
        return Err(format!("the server answered {}", response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("cannot fetch it: {}", crate::error::with_sources(&e)))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_BYTES {
            return Err(format!(
                "it is larger than {} MiB; refusing it",
                MAX_BYTES >> 20
            ));
        }
    }
    let digest = cache::sha256(&body);
    if let Some(pin) = pin {
        if digest != pin {
            return Err(format!(
                "its digest is {digest}, but devcontainer-lock.json pins {pin}; refusing it \
                 (if the Feature was updated on purpose, delete its entry from the lock file)"
            ));
        }
    }
    let dir = cache
        .put_blob(&digest, &body)
        .map_err(|e| format!("cannot unpack it: {e}"))?;
    progress(&format!("fetched {url} ({digest}, {} bytes)", body.len()));
    Ok(Fetched {
        digest,
        dir,
        bytes: body.len() as u64,
    })
}

/// Redirects followed (at most 10), but not to a local host the user did not allow: a public
/// server must not bounce the host's request to its own or its network's services.
fn redirects(local: super::LocalSources) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        let url = attempt.url();
        let host = url
            .host_str()
            .unwrap_or_default()
            .trim_matches(['[', ']'])
            .to_string();
        let authority = match url.port() {
            Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
            None => host.clone(),
        };
        if attempt.previous().len() >= 10 {
            attempt.error("more than 10 redirects")
        } else if super::reference::is_local_host(&host) && !local.allow(&host, &authority) {
            let message = format!("it redirects to {authority}, a local address");
            attempt.error(message)
        } else {
            attempt.follow()
        }
    })
}
