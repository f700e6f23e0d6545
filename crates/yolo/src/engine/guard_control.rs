//! Asking a running guard over its control protocol (`firewall::control`): the allowlist it
//! enforces, `allow`/`deny`. Used by `up` to update a kept guard, by `yolo allow`/`deny`/
//! `firewall` and by `yolo status --json`.

use super::Engine;
use crate::error::{Cause, Dependency, Error, Failure, Result};
use crate::firewall::control::{Request, Response, PEER_NOT_SERVED};
use crate::firewall::guard_socket::{self, CONTROL_TIMEOUT};

impl Engine {
    /// Send a control request to a running guard: over its socket in the log folder when this
    /// host reaches it (no process in the namespace the agent shares), else through `docker
    /// exec` (a remote engine; a guard made by an earlier yolo; sockets that do not cross the
    /// engine's file sharing). Each way ends within [`CONTROL_TIMEOUT`] with an error that
    /// says so.
    pub(crate) async fn control(&self, guard_id: &str, request: &Request) -> Result<Response> {
        // Wiped when dropped: a `proxysecrets` request carries the session's secrets.
        let line = request
            .to_line()
            .map_err(|e| Error::failed(Failure::Serialize, Cause::bare(e)))?;
        if !super::remote::engine_is_remote() {
            let name = self.container_name(guard_id).await?;
            let path = crate::audit::network_dir().join(guard_socket::socket_name(&name));
            match guard_socket::ask(&path, &line, CONTROL_TIMEOUT).await {
                // Not served (a user namespace that maps this user elsewhere): the exec below.
                Ok(text) if !not_served(&text) => return answer(&text),
                Ok(_) => {}
                Err(guard_socket::Failure::NoAnswer(why)) => {
                    return Err(Error::dependency(Dependency::Guard, format!(
                        "the firewall guard {name} did not answer over {}: {why}; check it with `yolo status`, and `yolo up` restarts it",
                        path.display()
                    )))
                }
                Err(guard_socket::Failure::Unreachable) => {}
            }
        }
        let json = std::str::from_utf8(line.strip_suffix(b"\n").unwrap_or(&line))
            .map_err(|e| Error::failed(Failure::Serialize, Cause::bare(e)))?;
        let secret = matches!(request, Request::ProxySecrets(_));
        answer(
            &self
                .guard_ctl(guard_id, json, secret, CONTROL_TIMEOUT)
                .await?,
        )
    }
}

/// Whether the guard's answer says its host socket does not serve this user.
fn not_served(text: &str) -> bool {
    serde_json::from_str::<Response>(text.trim())
        .is_ok_and(|r| !r.ok && r.error.is_some_and(|e| e.starts_with(PEER_NOT_SERVED)))
}

/// The guard's one-line answer: its response, or why it refused.
fn answer(text: &str) -> Result<Response> {
    let response: Response = serde_json::from_str(text.trim()).map_err(|e| {
        Error::dependency(
            Dependency::Guard,
            Cause::around(
                "unreadable answer from the firewall guard (",
                e,
                format!("): {}", text.trim()),
            ),
        )
    })?;
    if !response.ok {
        return Err(Error::dependency(
            Dependency::Guard,
            format!(
                "the firewall guard refused: {}",
                response.error.unwrap_or_default()
            ),
        ));
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusing_or_garbled_guard_is_unavailable_with_its_reason() {
        let ok = answer("{\"ok\":true,\"patterns\":[\"a.test\"]}\n").unwrap();
        assert_eq!(ok.patterns, Some(vec!["a.test".to_string()]));
        let refused = answer(r#"{"ok":false,"error":"nft failed"}"#).unwrap_err();
        assert_eq!(refused.code(), 69);
        assert_eq!(
            refused.to_string(),
            "the firewall guard refused: nft failed"
        );
        let garbled = answer("oops").unwrap_err();
        assert_eq!(garbled.code(), 69);
        assert!(
            garbled
                .to_string()
                .starts_with("unreadable answer from the firewall guard ("),
            "{garbled}"
        );
    }
}
