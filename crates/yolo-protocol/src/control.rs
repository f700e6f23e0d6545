//! The guard's control protocol: one JSON line per request and per response over the guard's
//! Unix socket. The host reaches it with `docker exec <guard> yolo-guard ctl '<json>'`.
//!
//! Requests: `{"op":"allow","patterns":[..]}`, `{"op":"deny","patterns":[..]}`, `{"op":"status"}`,
//! `{"op":"proxysecrets","ca_cert_pem":"..","ca_key_pem":"..","credentials":[["name","value"]]}`.
//! Responses: `{"ok":true,..}` or `{"ok":false,"error":".."}`.

use crate::NetworkMode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use zeroize::{Zeroize, Zeroizing};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Request {
    /// Add patterns to the running allowlist.
    Allow { patterns: Vec<String> },
    /// Remove patterns, and take away the addresses only those names had opened.
    Deny { patterns: Vec<String> },
    /// The effective allowlist, the dynamic set elements and the counters.
    Status,
    /// The session's secrets for the HTTP proxy, sent by `yolo up`/`run` after the guard is
    /// ready (again after a guard restart): the session CA that signs the proxy's leaves, and
    /// the real value of each credential by name. The guard keeps them in memory only and
    /// replaces the previous ones; until they arrive it refuses every inspected connection.
    /// Never logged: `Debug` shows the certificate and the names, not the key or the values.
    #[serde(rename = "proxysecrets")]
    ProxySecrets(ProxySecrets),
    /// Add method/path rules (`HOST METHOD /path`, `http::parse_host_rule`) to the running
    /// proxy's rules of an inspected host that has rules (`yolo allow --http`).
    #[serde(rename = "allowhttp")]
    AllowHttp { rules: Vec<String> },
    /// Take such rules away (`yolo deny --http`).
    #[serde(rename = "denyhttp")]
    DenyHttp { rules: Vec<String> },
    /// The questions held for the user's answer (`[firewall] on_refused = "ask"`).
    Pending,
    /// Answer a held question: `allow` adds its name to the session's allowlist and lets the
    /// held lookups through; otherwise they are refused. `by` and `how` go into its record.
    Decide {
        id: u64,
        allow: bool,
        by: String,
        #[serde(default)]
        how: String,
    },
}

/// A question the guard holds for the user's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    pub id: u64,
    /// `dns`.
    pub what: String,
    pub name: String,
    pub qtype: String,
    pub asked: chrono::DateTime<chrono::Utc>,
    /// Seconds until it is refused unanswered.
    pub expires_secs: u64,
    /// Lookups of the name waiting on it.
    pub waiting: u32,
    /// `http`: the query string of the first request held on it (at most 200 characters; the
    /// rule offered matches the path alone, so an allow lets any query through).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

/// See [`Request::ProxySecrets`].
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct ProxySecrets {
    /// The session CA's certificate, PEM.
    pub ca_cert_pem: String,
    /// Its PKCS#8 private key, PEM.
    pub ca_key_pem: String,
    /// `(credential name, real value)`, names as in `GuardConfig.http.credentials`.
    #[serde(default)]
    pub credentials: Vec<(String, String)>,
}

impl std::fmt::Debug for ProxySecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.credentials.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ProxySecrets")
            .field("ca_cert_pem", &self.ca_cert_pem)
            .field("ca_key_pem", &"<hidden>")
            .field("credentials", &names)
            .finish()
    }
}

/// The key and the values are wiped when the request is dropped, whichever way it went (armed,
/// refused, never sent).
impl Drop for ProxySecrets {
    fn drop(&mut self) {
        self.ca_key_pem.zeroize();
        for (_, value) in &mut self.credentials {
            value.zeroize();
        }
    }
}

impl Request {
    /// The request as one JSON line (with its `\n`), in a buffer wiped when dropped. Written
    /// into an allocation of the exact size (measured by a first pass), so no copy of a secret
    /// is left behind in a buffer that grew and was freed.
    pub fn to_line(&self) -> Result<Zeroizing<Vec<u8>>, serde_json::Error> {
        let mut counted = Counter::default();
        serde_json::to_writer(&mut CountingWriter(&mut counted.bytes), self)?;
        let mut line = Zeroizing::new(Vec::with_capacity(counted.bytes as usize + 1));
        serde_json::to_writer(&mut *line, self)?;
        line.push(b'\n');
        Ok(line)
    }
}

/// Counts what is written, keeps nothing.
struct CountingWriter<'a>(&'a mut u64);

impl std::io::Write for CountingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        *self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How the guard's error begins when its socket in the host's folder does not serve the peer
/// (its uid is not the host user's as the guard sees it, e.g. under a user namespace that maps
/// it elsewhere): the host then asks over `docker exec` instead.
pub const PEER_NOT_SERVED: &str = "this guard's control socket serves only the user who started it";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<NetworkMode>,
    /// The effective allowlist after the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patterns: Option<Vec<String>>,
    /// `deny`: the entries that were removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    /// `deny`: the addresses taken out of the dynamic sets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revoked: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elements: Vec<SetElement>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, Counter>,
    /// `status` of a guard that runs an HTTP proxy: whether it holds the session's secrets
    /// (false after a restart, until `yolo up`/`run` sends them again); absent without a proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_armed: Option<bool>,
    /// `pending`: the held questions; `decide`: the one answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<PendingApproval>,
}

impl Response {
    pub fn error(message: impl Into<String>) -> Response {
        Response {
            ok: false,
            error: Some(message.into()),
            ..Default::default()
        }
    }
}

/// One element of a dynamic set, as `yolo firewall` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetElement {
    pub set: String,
    /// The element as nft prints it: an address, a `addr . port` concatenation, a prefix.
    pub element: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_secs: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    pub packets: u64,
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_secrets_round_trip_and_their_debug_hides_key_and_values() {
        let request = Request::ProxySecrets(ProxySecrets {
            ca_cert_pem: "-----BEGIN CERTIFICATE-----".into(),
            ca_key_pem: "-----BEGIN PRIVATE KEY-----KEYBYTES".into(),
            credentials: vec![("anthropic".into(), "sk-ant-REALVALUE".into())],
        });
        let text = serde_json::to_string(&request).unwrap();
        assert!(text.starts_with(r#"{"op":"proxysecrets","#), "{text}");
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), request);
        let shown = format!("{request:?}");
        assert!(
            !shown.contains("KEYBYTES") && !shown.contains("REALVALUE"),
            "{shown}"
        );
        assert!(
            shown.contains("anthropic") && shown.contains("<hidden>"),
            "{shown}"
        );
        // The line: the JSON and its newline, in a buffer that never grew (no copy left in a
        // freed one).
        let line = request.to_line().unwrap();
        assert_eq!(&line[..], format!("{text}\n").as_bytes());
        assert_eq!(line.capacity(), line.len());
    }
}
