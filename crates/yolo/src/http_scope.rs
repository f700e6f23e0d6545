//! What HTTP inspection (issue 25) asks of a project before any session: whether its sessions
//! may inspect at all (then the agent container binds the workspace's CA folder), the
//! repository's narrowing rules, `[firewall] inspect`, and the CA folder's files. Below
//! `project` and `settings`, which need these when the project is evaluated and the flags
//! resolved; a session's own steps (credentials read, the guard armed) are `http_session`.

use crate::credentials;
use crate::error::{Error, Result};
use crate::user_config::UserConfig;
use std::collections::BTreeMap;
use std::path::Path;

/// Whether a session of this project may have its guard inspect HTTP: decides, when the
/// project is evaluated, whether the agent container binds the workspace's CA folder (made
/// once with the container; its files change with each session). A superset of what
/// `http_session::prepare` makes non-empty: a preset counts when its variable is set on the host, whichever
/// agent is run.
pub(crate) fn may_inspect(user: &UserConfig, repo_http: &BTreeMap<String, Vec<String>>) -> bool {
    !user.credentials.is_empty()
        || !user.http.is_empty()
        || user.firewall.inspect.is_some()
        || !repo_http.is_empty()
        || credentials::preset_vars().any(|v| std::env::var(v).is_ok_and(|value| !value.is_empty()))
}

/// The repository's `customizations.yolo.http` (requests that narrow).
pub(crate) fn repo_http(
    config: &crate::devcontainer::model::DevContainer,
) -> BTreeMap<String, Vec<String>> {
    config
        .customizations
        .as_ref()
        .and_then(|c| c.yolo.as_ref())
        .map(|y| y.http.clone())
        .unwrap_or_default()
}

/// `[firewall] inspect`: `"all"` or unset.
pub(crate) fn inspect_all(user: &UserConfig) -> Result<bool> {
    match user.firewall.inspect.as_deref() {
        None => Ok(false),
        Some("all") => Ok(true),
        Some(other) => Err(Error::UserConfig {
            file: UserConfig::path(),
            message: format!(
                "[firewall] inspect = {other:?}: the only value is \"all\" (every HTTPS host through the guard's proxy); remove it to inspect only the hosts with rules or a credential"
            ),
        }),
    }
}

/// Write the workspace's CA folder: the extra certificates and, once there is one, the session
/// CA's (`extra-ca.crt`), and the same on top of the host's roots (`bundle.pem`). Each file is
/// replaced whole (a rename in the folder), so a tool never reads half of one. Without a
/// session certificate (the project evaluated, no session made yet) files already there are
/// kept: they hold the running session's.
pub(crate) fn write_ca_files(
    devcontainer_id: &str,
    extra_ca: Option<&crate::ca::ExtraCa>,
    session_cert: Option<&str>,
) -> Result<std::path::PathBuf> {
    let dir = crate::store::session_ca(devcontainer_id);
    let (extra, bundle) = match extra_ca {
        Some(ca) => (ca.pem.clone(), ca.bundle.clone()),
        None => (String::new(), crate::ca::host_roots_pem()),
    };
    write_ca_dir(&dir, &extra, &bundle, session_cert)?;
    Ok(dir)
}

/// [`write_ca_files`] in `dir`, with the extra certificates and the bundle given.
fn write_ca_dir(dir: &Path, extra: &str, bundle: &str, session_cert: Option<&str>) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let session_cert = session_cert.unwrap_or_default();
    for (name, text) in [
        (crate::ca::EXTRA, format!("{extra}{session_cert}")),
        (crate::ca::BUNDLE, format!("{bundle}{session_cert}")),
    ] {
        let path = dir.join(name);
        if session_cert.is_empty() && path.exists() {
            continue;
        }
        if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            continue;
        }
        let tmp = dir.join(format!(".{name}.new"));
        std::fs::write(&tmp, &text).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_folder_gets_the_session_cert_and_an_evaluation_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join("ca");
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
        write_ca_dir(&dir, "EXTRA\n", "ROOTS\nEXTRA\n", None).unwrap();
        assert_eq!(read(crate::ca::EXTRA), "EXTRA\n");
        assert_eq!(read(crate::ca::BUNDLE), "ROOTS\nEXTRA\n");
        write_ca_dir(&dir, "EXTRA\n", "ROOTS\nEXTRA\n", Some("SESSION1\n")).unwrap();
        assert_eq!(read(crate::ca::EXTRA), "EXTRA\nSESSION1\n");
        assert_eq!(read(crate::ca::BUNDLE), "ROOTS\nEXTRA\nSESSION1\n");
        // The project evaluated again (another command) keeps the running session's.
        write_ca_dir(&dir, "EXTRA\n", "ROOTS\nEXTRA\n", None).unwrap();
        assert_eq!(read(crate::ca::BUNDLE), "ROOTS\nEXTRA\nSESSION1\n");
        // A new session's replaces it.
        write_ca_dir(&dir, "EXTRA\n", "ROOTS\nEXTRA\n", Some("SESSION2\n")).unwrap();
        assert_eq!(read(crate::ca::EXTRA), "EXTRA\nSESSION2\n");
    }

    #[test]
    fn inspect_takes_all_or_nothing() {
        let mut user = UserConfig::default();
        assert!(!inspect_all(&user).unwrap());
        user.firewall.inspect = Some("all".into());
        assert!(inspect_all(&user).unwrap());
        user.firewall.inspect = Some("some".into());
        let err = inspect_all(&user).unwrap_err();
        assert_eq!(err.code(), 65);
        assert!(err.to_string().contains("\"all\""), "{err}");
    }
}
