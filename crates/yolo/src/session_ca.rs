//! The session CA: a certificate authority made on the host for one session, with which the
//! guard's proxy signs a leaf for each host it inspects (issue 25). Its key goes to the guard
//! over the control socket and lives in the guard's memory only: yolo never writes it to disk
//! and it never enters the agent container. Its certificate is public: the agent trusts it the
//! way it trusts the user's extra CA certificates (the bundle and the usual variables, `ca`).
//!
//! A CA that can only sign leaves (path length 0), valid from today for a year; ECDSA P-256
//! (rcgen's default, what the proxy signs fastest with).

use crate::error::{Cause, Error, Failure, Result};
use sha2::{Digest, Sha256};

/// The session CA: its certificate (PEM), and its key (PEM), which `Debug` never shows.
pub(crate) struct SessionCa {
    pub(crate) cert_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for SessionCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCa")
            .field("fingerprint", &self.fingerprint())
            .finish_non_exhaustive()
    }
}

impl SessionCa {
    /// A new CA named after the session (`label`: the workspace's short id, to tell sessions
    /// apart in a certificate viewer).
    pub(crate) fn new(label: &str) -> Result<Self> {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
        let fail = |e: rcgen::Error| Error::Failed {
            what: Failure::SessionSecret,
            cause: Cause::of("cannot make the session's CA certificate", e),
        };
        let key = KeyPair::generate().map_err(fail)?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("yolo session CA {label}"));
        params
            .distinguished_name
            .push(DnType::OrganizationName, "yolo (this session only)");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let today = chrono::Utc::now().date_naive();
        use chrono::Datelike;
        let (y, m, d) = (today.year(), today.month() as u8, today.day() as u8);
        params.not_before = rcgen::date_time_ymd(y, m, d);
        // The 29th of February has no twin a year later: the 28th is close enough.
        params.not_after = rcgen::date_time_ymd(y + 1, m, d.min(28));
        let cert = params.self_signed(&key).map_err(fail)?;
        Ok(SessionCa {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The key (PEM), for the control request that hands it to the guard, and nothing else.
    pub(crate) fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// `sha256:<hex>` of the certificate's DER, as the extra CA certificates are named.
    pub(crate) fn fingerprint(&self) -> String {
        use rustls_pki_types::pem::PemObject;
        match rustls_pki_types::CertificateDer::from_pem_slice(self.cert_pem.as_bytes()) {
            Ok(der) => format!("sha256:{}", hex::encode(Sha256::digest(der.as_ref()))),
            Err(_) => "sha256:?".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_ca_signs_leaves_clients_verify_and_debug_hides_its_key() {
        let ca = SessionCa::new("abc123").unwrap();
        assert!(ca.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(ca.key_pem().contains("PRIVATE KEY"));
        // A leaf it signs verifies for its name, as a client in the agent will check it.
        let key = rcgen::KeyPair::from_pem(ca.key_pem()).unwrap();
        let issuer = rcgen::Issuer::from_ca_cert_pem(&ca.cert_pem, key).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["api.example.test".to_string()])
            .unwrap()
            .signed_by(&leaf_key, &issuer)
            .unwrap();
        use rustls_pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls_pki_types::CertificateDer::from_pem_slice(ca.cert_pem.as_bytes()).unwrap())
            .unwrap();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots.into(), provider)
                .build()
                .unwrap();
        let name = |n: &str| rustls_pki_types::ServerName::try_from(n.to_string()).unwrap();
        let now = rustls_pki_types::UnixTime::now();
        use rustls::client::danger::ServerCertVerifier;
        verifier
            .verify_server_cert(leaf.der(), &[], &name("api.example.test"), &[], now)
            .unwrap();
        assert!(verifier
            .verify_server_cert(leaf.der(), &[], &name("other.example.test"), &[], now)
            .is_err());
        let shown = format!("{ca:?}");
        assert!(!shown.contains("PRIVATE"), "{shown}");
        assert!(shown.contains(&ca.fingerprint()), "{shown}");
        // Two sessions never share a key.
        let other = SessionCa::new("abc123").unwrap();
        assert_ne!(other.key_pem(), ca.key_pem());
        assert_ne!(other.fingerprint(), ca.fingerprint());
    }
}
