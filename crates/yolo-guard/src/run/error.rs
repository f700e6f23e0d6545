//! Why `yolo-guard run` stopped: the guard's error from before the start-up began (its config,
//! its log), or a step of the start-up that failed, which means the agent will not be started.
//! The host shows the message when the guard does not become ready.

use crate::firewall;
use yolo_protocol::allowlist::PatternError;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The config file or the session log (the guard's [`crate::error::Error`]).
    #[error(transparent)]
    Guard(#[from] crate::error::Error),
    /// A step of the start-up failed: the guard never says ready and the host never starts the
    /// agent. `step` says what was being done, `cause` why it failed, `hint` what to do.
    #[error(
        "{step}: {cause}{}; the agent will not be started",
        .hint.map(|hint| format!("; {hint}")).unwrap_or_default()
    )]
    NotStarted {
        step: String,
        #[source]
        cause: Cause,
        hint: Option<&'static str>,
    },
}

/// Why a step of the start-up failed.
#[derive(Debug, thiserror::Error)]
pub enum Cause {
    /// The firewall: a ruleset that cannot be applied or does not verify, a seal not made.
    #[error(transparent)]
    Firewall(#[from] firewall::Error),
    /// A system call (a socket, a file, a thread).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The allowlist of the config.
    #[error(transparent)]
    Allowlist(#[from] PatternError),
    /// A listen address of the guard's own that does not parse.
    #[error(transparent)]
    Address(#[from] std::net::AddrParseError),
    /// The HTTP proxy's configuration (its trusted roots), as the TLS library read it.
    #[error("{0}")]
    Proxy(String),
    /// A condition the guard refuses to start under, and why.
    #[error("{0}")]
    Refused(&'static str),
}

impl StartError {
    /// Step `step` failed because of `cause`.
    pub(crate) fn step(step: impl Into<String>, cause: impl Into<Cause>) -> Self {
        StartError::NotStarted {
            step: step.into(),
            cause: cause.into(),
            hint: None,
        }
    }

    /// The same, with what the user can do about it.
    pub(crate) fn with_hint(mut self, what_to_do: &'static str) -> Self {
        if let StartError::NotStarted { hint, .. } = &mut self {
            *hint = Some(what_to_do);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{line, Error};

    /// The program's name stands once in what the guard prints, whichever error it is.
    #[test]
    fn the_printed_line_names_the_program_once() {
        let not_started = StartError::step(
            "cannot write /run/ready",
            std::io::Error::from_raw_os_error(libc::EACCES),
        );
        let config = StartError::from(Error::Config {
            file: "/etc/yolo/guard.json".into(),
            message: "missing field `mode`".into(),
        });
        for error in [not_started, config] {
            let line = line(&error);
            assert!(line.starts_with("yolo-guard: "), "{line}");
            assert_eq!(line.matches("yolo-guard").count(), 1, "{line}");
        }
        assert_eq!(
            line(&Error::other("the file watcher did not start")),
            "yolo-guard: the file watcher did not start"
        );
    }
}
