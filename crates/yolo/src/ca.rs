//! Extra CA certificates the user hands yolo (`extra_ca` in the user config, `--extra-ca`):
//! for a network that intercepts TLS with its own CA (a corporate proxy), so that image builds
//! and the container trust it. Never the repository's to set.
//!
//! The certificates are read on the host (PEM, `rustls-pki-types`), each named by the SHA-256 of
//! its DER (its fingerprint, in the audit log and the approval); the host's own trusted roots
//! (`rustls-native-certs`) plus the extra ones make a bundle for the tools whose variable
//! replaces the store (`SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE`, ...), the extra ones alone go where
//! a variable adds to it (`NODE_EXTRA_CA_CERTS`) and to the system store's source folder.

use crate::error::{Error, Result};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Where the certificates are in an image yolo builds and in the container.
pub(crate) const DIR: &str = "/usr/local/share/yolo-ca";
/// The extra certificates alone (PEM).
pub(crate) const EXTRA: &str = "extra-ca.crt";
/// The host's trusted roots and the extra certificates (PEM).
pub(crate) const BUNDLE: &str = "bundle.pem";
/// The folder of the build context (and of yolo's data) that holds both files.
pub(crate) const CONTEXT_DIR: &str = ".yolo-ca";

/// The variables pointing at the certificates: the bundle where a variable replaces the
/// store, the extra ones where it adds to it.
pub(crate) fn env() -> Vec<(&'static str, String)> {
    let bundle = format!("{DIR}/{BUNDLE}");
    let extra = format!("{DIR}/{EXTRA}");
    vec![
        ("NODE_EXTRA_CA_CERTS", extra),
        ("SSL_CERT_FILE", bundle.clone()),
        ("REQUESTS_CA_BUNDLE", bundle.clone()),
        ("PIP_CERT", bundle.clone()),
        ("CARGO_HTTP_CAINFO", bundle.clone()),
        ("GIT_SSL_CAINFO", bundle.clone()),
        ("CURL_CA_BUNDLE", bundle),
    ]
}

/// The extra certificates, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExtraCa {
    /// `sha256:<hex>` of each certificate's DER, in the order given.
    pub(crate) fingerprints: Vec<String>,
    /// The extra certificates (PEM).
    pub(crate) pem: String,
    /// The host's trusted roots, then the extra certificates (PEM).
    pub(crate) bundle: String,
}

impl ExtraCa {
    /// Read `paths` (files, or folders whose `*.crt`/`*.pem` files are read): `None` without
    /// any. A path that holds no certificate is an error naming it (`source`: where the path
    /// was given, for the message).
    pub(crate) fn load(paths: &[PathBuf], source: &Given) -> Result<Option<ExtraCa>> {
        if paths.is_empty() {
            return Ok(None);
        }
        let mut ders: Vec<CertificateDer<'static>> = Vec::new();
        for path in paths {
            for file in files_of(path, source)? {
                let bytes = std::fs::read(&file).map_err(|e| Error::io(&file, e))?;
                let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|e| bad(&file, source, &format!("it is not PEM ({e})")))?;
                if certs.is_empty() {
                    return Err(bad(
                        &file,
                        source,
                        "it holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                    ));
                }
                for cert in certs {
                    if !ders.contains(&cert) {
                        ders.push(cert);
                    }
                }
            }
        }
        let fingerprints = ders.iter().map(|d| fingerprint(d)).collect();
        let pem: String = ders.iter().map(|d| to_pem(d)).collect();
        let mut bundle: String = host_roots()
            .iter()
            .filter(|d| !ders.contains(d))
            .map(|d| to_pem(d))
            .collect();
        bundle.push_str(&pem);
        Ok(Some(ExtraCa {
            fingerprints,
            pem,
            bundle,
        }))
    }

    /// Write both files to `<dir>/` (a folder of yolo's data, bound read-only into the
    /// container), only when they changed.
    pub(crate) fn write_to(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        for (name, text) in [(EXTRA, &self.pem), (BUNDLE, &self.bundle)] {
            let path = dir.join(name);
            if std::fs::read_to_string(&path).ok().as_ref() != Some(text) {
                std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
            }
        }
        Ok(())
    }

    /// The folder of yolo's data the container binds: one per set of certificates.
    pub(crate) fn host_dir(&self) -> PathBuf {
        let mut hasher = Sha256::new();
        for f in &self.fingerprints {
            hasher.update(f.as_bytes());
        }
        let id = hex::encode(hasher.finalize());
        crate::user_config::data_dir().join("ca").join(&id[..16])
    }

    /// `(path in the build context, content)` of the files a build adds.
    pub(crate) fn context_files(&self) -> [(String, &str); 2] {
        [
            (format!("{CONTEXT_DIR}/{EXTRA}"), self.pem.as_str()),
            (format!("{CONTEXT_DIR}/{BUNDLE}"), self.bundle.as_str()),
        ]
    }
}

/// The Dockerfile lines that make a build stage trust the certificates (its RUN steps and the
/// image): the files copied in (also into the system store's source folder, so an
/// `update-ca-certificates` in the image keeps them) and the variables set. After each `FROM`.
pub(crate) fn stage_lines() -> String {
    let env: Vec<String> = env()
        .into_iter()
        .map(|(k, v)| format!("{k}=\"{v}\""))
        .collect();
    format!(
        "COPY {CONTEXT_DIR}/ {DIR}/\nCOPY {CONTEXT_DIR}/{EXTRA} /usr/local/share/ca-certificates/yolo-extra-ca.crt\nENV {}\n",
        env.join(" ")
    )
}

/// `text` with `stage_lines` after every `FROM` instruction (its last line, continuations
/// included).
pub(crate) fn rewrite_dockerfile(text: &str) -> String {
    let ends = crate::policy::from_instruction_ends(text);
    let mut out = String::with_capacity(text.len() + ends.len() * 300);
    for (index, line) in text.lines().enumerate() {
        out.push_str(line);
        out.push('\n');
        if ends.contains(&(index + 1)) {
            out.push_str(&stage_lines());
        }
    }
    out
}

fn files_of(path: &Path, source: &Given) -> Result<Vec<PathBuf>> {
    let meta =
        std::fs::metadata(path).map_err(|e| bad(path, source, &format!("cannot read it ({e})")))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| Error::io(path, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "crt" || e == "pem"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(bad(path, source, "the folder holds no .crt or .pem file"));
    }
    Ok(files)
}

/// Where the paths were given: a bad one is a usage error (64) for the flag, a config error
/// (65) naming the file for the user config.
pub(crate) enum Given {
    Flag,
    Config(PathBuf),
}

fn bad(path: &Path, source: &Given, why: &str) -> Error {
    match source {
        Given::Flag => Error::Usage(format!(
            "--extra-ca {}: {why}; give a PEM file of CA certificates or a folder of .crt/.pem files",
            path.display()
        )),
        Given::Config(file) => Error::UserConfig {
            file: file.clone(),
            message: format!(
                "\"extra_ca\": {}: {why}; give a PEM file of CA certificates or a folder of .crt/.pem files",
                path.display()
            ),
        },
    }
}

/// `sha256:<hex>` of a certificate's DER.
pub(crate) fn fingerprint(der: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(der)))
}

fn to_pem(der: &[u8]) -> String {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in text.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// The host's trusted roots (none when they cannot be read: the extra ones then stand alone).
fn host_roots() -> Vec<CertificateDer<'static>> {
    rustls_native_certs::load_native_certs().certs
}
