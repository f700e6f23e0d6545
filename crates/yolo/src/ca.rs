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
        crate::store::extra_ca(&id[..16])
    }

    /// `(path in the build context, content)` of the files a build adds.
    pub(crate) fn context_files(&self) -> [(String, &str); 2] {
        [
            (format!("{CONTEXT_DIR}/{EXTRA}"), self.pem.as_str()),
            (format!("{CONTEXT_DIR}/{BUNDLE}"), self.bundle.as_str()),
        ]
    }
}

/// The system store's bundle in Debian, Ubuntu and Alpine images, which most tools read.
pub(crate) const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The Dockerfile lines that make a build stage trust the certificates (its RUN steps and the
/// image): the files copied in, the bundle as the system store's (`SYSTEM_BUNDLE`; the extra
/// ones also into its source folder, so an `update-ca-certificates` in the image rebuilds the
/// store with them), and the variables set. After each `FROM`; no RUN step, so a stage without
/// a shell (`scratch`, distroless) builds too.
pub(crate) fn stage_lines() -> String {
    let env: Vec<String> = env()
        .into_iter()
        .map(|(k, v)| format!("{k}=\"{v}\""))
        .collect();
    format!(
        "COPY {CONTEXT_DIR}/ {DIR}/\nCOPY {CONTEXT_DIR}/{EXTRA} /usr/local/share/ca-certificates/yolo-extra-ca.crt\nCOPY {CONTEXT_DIR}/{BUNDLE} {SYSTEM_BUNDLE}\nENV {}\n",
        env.join(" ")
    )
}

/// `text` with `stage_lines` after every `FROM` instruction (its last line, continuations
/// included).
pub(crate) fn rewrite_dockerfile(text: &str) -> String {
    let ends = crate::dockerfile::from_instruction_ends(text);
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

/// What a build's output says when a TLS certificate could not be verified (npm, pip and
/// requests, curl, OpenSSL, Go, Rust's tools, git, Java).
const CERTIFICATE_ERRORS: [&str; 10] = [
    "SELF_SIGNED_CERT_IN_CHAIN",
    "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
    "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    "CERTIFICATE_VERIFY_FAILED",
    "certificate verify failed",
    "unable to get local issuer certificate",
    "self-signed certificate in certificate chain",
    "x509: certificate signed by unknown authority",
    "server certificate verification failed",
    "PKIX path building failed",
];

/// The advice for a failed build whose output (`text`) shows a certificate error: what is
/// likely wrong and how to hand yolo the certificate (`configured`: some were given already).
pub(crate) fn certificate_hint(text: &str, configured: bool) -> Option<String> {
    let lower = text.to_lowercase();
    let seen = CERTIFICATE_ERRORS
        .iter()
        .find(|e| lower.contains(&e.to_lowercase()))?;
    Some(if configured {
        format!(
            "a RUN step could not verify a TLS certificate ({seen}) although extra CA certificates were given: check that they include the CA the proxy signs with (`yolo doctor` shows what this machine trusts)"
        )
    } else {
        format!(
            "a RUN step could not verify a TLS certificate ({seen}): a proxy on this network probably intercepts TLS with its own CA; hand it to yolo with `yolo up --extra-ca /path/to/ca.pem` (a file or a folder, e.g. /usr/local/share/ca-certificates) or `extra_ca = [...]` in {} (`yolo doctor` shows what this machine trusts)",
            crate::user_config::UserConfig::path().display()
        )
    })
}

/// The usual signs that the host trusts CA certificates of its own (a TLS-intercepting proxy):
/// the variables tools read, and certificates added to the system store's source folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HostSigns {
    /// `NAME=value` of the variables that are set.
    pub(crate) variables: Vec<String>,
    /// The files under `/usr/local/share/ca-certificates`.
    pub(crate) local_store: Vec<PathBuf>,
}

/// The variables that point tools at CA certificates.
const SIGN_VARIABLES: [&str; 6] = [
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
];

/// Where Debian and Ubuntu take added CA certificates from.
const LOCAL_STORE: &str = "/usr/local/share/ca-certificates";

impl HostSigns {
    pub(crate) fn of_this_host() -> HostSigns {
        let variables = SIGN_VARIABLES
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|v| format!("{name}={v}")))
            .collect();
        let mut local_store: Vec<PathBuf> = std::fs::read_dir(LOCAL_STORE)
            .map(|dir| {
                dir.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "crt" || e == "pem"))
                    .collect()
            })
            .unwrap_or_default();
        local_store.sort();
        HostSigns {
            variables,
            local_store,
        }
    }

    /// What to tell the user: what was seen and the exact setting, or nothing without signs.
    pub(crate) fn advice(&self) -> Option<String> {
        if self.variables.is_empty() && self.local_store.is_empty() {
            return None;
        }
        let mut seen = self.variables.clone();
        if !self.local_store.is_empty() {
            seen.push(format!(
                "{} certificate(s) in {LOCAL_STORE}",
                self.local_store.len()
            ));
        }
        let path = if self.local_store.is_empty() {
            "/path/to/your-ca.pem".to_string()
        } else {
            LOCAL_STORE.to_string()
        };
        Some(format!(
            "this machine trusts CA certificates of its own ({}): if a proxy intercepts TLS, builds and agents in the container need them too: add `extra_ca = [\"{path}\"]` to {} or pass `--extra-ca {path}` to `yolo up`",
            seen.join("; "),
            crate::user_config::UserConfig::path().display()
        ))
    }
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

/// The host's trusted roots (PEM): the guard's proxy verifies the real hosts against them
/// (and the extra certificates, `ExtraCa::bundle`, when the user gave any).
pub(crate) fn host_roots_pem() -> String {
    host_roots().iter().map(|d| to_pem(d)).collect()
}

/// The host's trusted roots (none when they cannot be read: the extra ones then stand alone).
fn host_roots() -> Vec<CertificateDer<'static>> {
    rustls_native_certs::load_native_certs().certs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A throwaway self-signed CA (`openssl req -x509 -newkey ec ...`), and its SHA-256
    /// fingerprint as `openssl x509 -noout -fingerprint -sha256` prints it.
    const CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBgzCCASmgAwIBAgIUQ1RrGGIREgcrPmyxsEVFtZHYSR0wCgYIKoZIzj0EAwIw
FzEVMBMGA1UEAwwMeW9sbyB0ZXN0IENBMB4XDTI2MTEyMjEzMjAzNVoXDTM2MTEx
OTEzMjAzNVowFzEVMBMGA1UEAwwMeW9sbyB0ZXN0IENBMFkwEwYHKoZIzj0CAQYI
KoZIzj0DAQcDQgAELolcBLOX1T2gRIqzEmt29hvcRSmHvWNOqWGB5+I18uFchfnO
X35gfLxKSygdfvpzyRVBr6bdaiax5LF0MGN68aNTMFEwHQYDVR0OBBYEFL0Edjmj
didGWpIXU4jeWuOBXt/IMB8GA1UdIwQYMBaAFL0EdjmjdidGWpIXU4jeWuOBXt/I
MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIhAMo5/50Kpyqksw90
+KhgSR0WGMfzT62T64n0H6KsPvVmAiAwLEivQNDAOOSjopkCdJrhGJPeF3kyE+TD
7D13Ei1vLA==
-----END CERTIFICATE-----
";
    const FINGERPRINT: &str = "81:B3:00:68:C7:05:EA:A9:46:13:E9:19:7A:0F:A8:D4:FD:8E:33:1F:61:AD:A5:E6:60:6B:4C:08:89:56:FA:2F";

    #[test]
    fn certificates_are_read_from_files_and_folders_and_fingerprinted_as_openssl_does() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("corp.crt");
        std::fs::write(&file, CERT).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not read").unwrap();
        let ca = ExtraCa::load(&[file.clone(), dir.path().to_path_buf()], &Given::Flag)
            .unwrap()
            .unwrap();
        let expected = format!("sha256:{}", FINGERPRINT.replace(':', "").to_lowercase());
        assert_eq!(ca.fingerprints, [expected], "one certificate, given twice");
        assert_eq!(ca.pem.trim(), CERT.trim());
        assert!(
            ca.bundle.ends_with(&ca.pem),
            "the extra ones close the bundle"
        );
        assert!(ExtraCa::load(&[], &Given::Flag).unwrap().is_none());
    }

    #[test]
    fn a_file_without_a_certificate_is_a_usage_error_or_a_config_error() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.pem");
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let e = ExtraCa::load(std::slice::from_ref(&key), &Given::Flag).unwrap_err();
        assert_eq!(e.code(), 64, "{e}");
        assert!(e.to_string().contains("holds no PEM certificate"), "{e}");
        let config = dir.path().join("config.toml");
        let e =
            ExtraCa::load(&[dir.path().join("missing.crt")], &Given::Config(config)).unwrap_err();
        assert_eq!(e.code(), 65, "{e}");
        assert!(e.to_string().contains("extra_ca"), "{e}");
        let empty = tempfile::tempdir().unwrap();
        let e = ExtraCa::load(&[empty.path().to_path_buf()], &Given::Flag).unwrap_err();
        assert!(e.to_string().contains("no .crt or .pem file"), "{e}");
    }

    #[test]
    fn a_certificate_error_in_a_builds_output_says_how_to_hand_yolo_the_ca() {
        let npm =
            "npm error code SELF_SIGNED_CERT_IN_CHAIN\nnpm error errno SELF_SIGNED_CERT_IN_CHAIN";
        let hint = certificate_hint(npm, false).unwrap();
        assert!(
            hint.contains("--extra-ca") && hint.contains("SELF_SIGNED_CERT_IN_CHAIN"),
            "{hint}"
        );
        let pip = "SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate";
        assert!(certificate_hint(pip, true)
            .unwrap()
            .contains("although extra CA"));
        assert!(certificate_hint("E: Unable to locate package npm", false).is_none());
    }

    #[test]
    fn the_usual_signs_give_the_exact_setting() {
        let none = HostSigns::default();
        assert!(none.advice().is_none());
        let signs = HostSigns {
            variables: vec!["NODE_EXTRA_CA_CERTS=/etc/corp.pem".into()],
            local_store: vec!["/usr/local/share/ca-certificates/corp.crt".into()],
        };
        let advice = signs.advice().unwrap();
        assert!(
            advice.contains("NODE_EXTRA_CA_CERTS=/etc/corp.pem"),
            "{advice}"
        );
        assert!(
            advice.contains("--extra-ca /usr/local/share/ca-certificates"),
            "{advice}"
        );
        assert!(
            advice.contains("extra_ca = [\"/usr/local/share/ca-certificates\"]"),
            "{advice}"
        );
    }

    #[test]
    fn every_stage_of_a_dockerfile_trusts_the_certificates() {
        let text = "# syntax=docker/dockerfile:1\nARG BASE=debian\nFROM ${BASE} AS build\nRUN make\nFROM \\\n  scratch\nCOPY --from=build /out /\n";
        let out = rewrite_dockerfile(text);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[2], "FROM ${BASE} AS build");
        assert!(
            lines[3].starts_with("COPY .yolo-ca/ /usr/local/share/yolo-ca/"),
            "{out}"
        );
        assert_eq!(
            lines[5],
            "COPY .yolo-ca/bundle.pem /etc/ssl/certs/ca-certificates.crt"
        );
        assert!(lines[6].starts_with("ENV NODE_EXTRA_CA_CERTS="), "{out}");
        assert_eq!(lines[7], "RUN make");
        assert_eq!(lines[9], "  scratch");
        assert!(lines[10].starts_with("COPY .yolo-ca/"), "{out}");
        assert_eq!(out.matches("ENV NODE_EXTRA_CA_CERTS").count(), 2);
        assert!(out.ends_with("COPY --from=build /out /\n"));
    }
}
