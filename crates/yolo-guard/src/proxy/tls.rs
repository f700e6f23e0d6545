//! The proxy's two TLS ends. Towards the agent: a leaf certificate per SNI name, signed by the
//! session CA (made on the host for this session; its key reaches the guard only over the
//! control socket and stays in memory), ALPN `h2` and `http/1.1`. Towards the real host: a
//! client verified against the roots the guard was given (a PEM bundle and the user's extra
//! CAs) and nothing else: the agent's own trust store plays no part.

use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Leaf configurations kept at once; past it the cache starts over (an agent that asks for
/// ever new names makes the proxy sign again, it does not grow the guard).
const LEAF_CACHE: usize = 512;

pub(crate) const ALPN_H2: &[u8] = b"h2";
pub(crate) const ALPN_HTTP1: &[u8] = b"http/1.1";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The session CA as the proxy uses it: what signs, and the leaf configurations made so far.
pub(crate) struct SessionCa {
    issuer: Issuer<'static, KeyPair>,
    ca_der: CertificateDer<'static>,
    /// One key for every leaf: signing a new name costs a signature, not a key generation.
    leaf_key: KeyPair,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

impl SessionCa {
    /// The CA from its certificate and PKCS#8 key, both PEM.
    pub(crate) fn from_pem(cert_pem: &str, key_pem: &str) -> Result<SessionCa, String> {
        let key = KeyPair::from_pem(key_pem)
            .map_err(|e| format!("the session CA's key is not a PEM PKCS#8 key: {e}"))?;
        let ca_der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| format!("the session CA's certificate is not PEM: {e}"))?;
        let issuer = Issuer::from_ca_cert_der(&ca_der, key)
            .map_err(|e| format!("the session CA's certificate cannot sign: {e}"))?;
        let leaf_key = KeyPair::generate().map_err(|e| format!("cannot make the leaf key: {e}"))?;
        Ok(SessionCa {
            issuer,
            ca_der,
            leaf_key,
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The server configuration for `name` (lowercase, as the SNI said it): a leaf for that
    /// name alone, signed now or taken from the cache.
    pub(crate) fn server_config(&self, name: &str) -> Result<Arc<ServerConfig>, String> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(config) = leaves.get(name) {
            return Ok(Arc::clone(config));
        }
        let mut params = CertificateParams::new(vec![name.to_string()])
            .map_err(|e| format!("no certificate for {name:?}: {e}"))?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let leaf = params
            .signed_by(&self.leaf_key, &self.issuer)
            .map_err(|e| format!("cannot sign a certificate for {name:?}: {e}"))?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone(), self.ca_der.clone()], key)
            .map_err(|e| format!("the leaf for {name:?} is refused by rustls: {e}"))?;
        config.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP1.to_vec()];
        let config = Arc::new(config);
        if leaves.len() >= LEAF_CACHE {
            leaves.clear();
        }
        leaves.insert(name.to_string(), Arc::clone(&config));
        Ok(config)
    }
}

/// The client ends towards the real hosts: one offering both protocols, one HTTP/1.1 only (an
/// Upgrade, which HTTP/2 has no way to carry).
pub(crate) struct Upstream {
    pub(crate) any: Arc<ClientConfig>,
    pub(crate) http1: Arc<ClientConfig>,
}

impl Upstream {
    /// Trust exactly the certificates in `pems` (PEM texts: the system's roots, the user's
    /// extra CAs). An empty result is an error: a proxy that trusts nothing refuses every
    /// host, which is a configuration mistake to say at the start, not per request.
    pub(crate) fn from_pem(pems: &[&[u8]]) -> Result<Upstream, String> {
        let mut roots = RootCertStore::empty();
        for pem in pems {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("a CA bundle is not PEM: {e}"))?;
                // A certificate webpki cannot take as a root (an odd old one in a system
                // bundle) is skipped, as every TLS client does with such bundles.
                let _ = roots.add(cert);
            }
        }
        if roots.is_empty() {
            return Err("the CA bundles hold no usable certificate".into());
        }
        let roots = Arc::new(roots);
        let config = |alpn: &[&[u8]]| -> Result<Arc<ClientConfig>, String> {
            let mut config = ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(Arc::clone(&roots))
                .with_no_client_auth();
            config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
            Ok(Arc::new(config))
        };
        Ok(Upstream {
            any: config(&[ALPN_H2, ALPN_HTTP1])?,
            http1: config(&[ALPN_HTTP1])?,
        })
    }
}
