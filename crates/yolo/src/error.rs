//! The one error type of yolo. Every variant's `Display` is written for a human: what failed,
//! where (file, line, property), and what to do about it. `code()` is the process exit status.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
pub enum Error {
    /// The devcontainer.json (or another input file) is not valid: syntax, wrong type, bad value.
    Config {
        file: PathBuf,
        line: Option<usize>,
        column: Option<usize>,
        property: Option<String>,
        message: String,
    },
    /// No devcontainer.json found, or several and none chosen.
    Discovery(String),
    /// The repository asks for something the user has not granted.
    Refused {
        file: PathBuf,
        property: String,
        value: String,
        reason: String,
        grant: String,
    },
    /// The repository asks for something no grant can allow; `reason` says why and what to do.
    Forbidden {
        file: PathBuf,
        property: String,
        value: String,
        reason: String,
    },
    /// A feature of the devcontainer spec yolo does not support yet.
    Unsupported {
        file: PathBuf,
        property: String,
        message: String,
    },
    /// Docker is not reachable, or answered with an error.
    Docker {
        action: String,
        message: String,
        hint: Option<String>,
    },
    /// A lifecycle hook or host command failed.
    Hook { name: String, code: i64 },
    /// The user declined a prompt, or a prompt was needed in a non-interactive run.
    NotApproved(String),
    /// A command ran in the container and exited non-zero: pass its code through silently.
    ExitCode(i32),
    /// The user's own config file is invalid.
    UserConfig { file: PathBuf, message: String },
    /// Reading or writing a local file failed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A command-line argument clap lets through but yolo cannot use (e.g. an unknown grant).
    Usage(String),
    /// Anything else, already phrased for a human.
    Other(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Exit status of a usage error (EX_USAGE): a bad flag or value, caught before anything runs.
    pub const USAGE: i32 = 64;

    pub fn code(&self) -> i32 {
        match self {
            Error::ExitCode(code) => *code,
            Error::Config { .. } | Error::UserConfig { .. } | Error::Unsupported { .. } => 65,
            Error::Discovery(_) => 66,
            Error::Usage(_) => 64,
            Error::Refused { .. } | Error::Forbidden { .. } | Error::NotApproved(_) => 77,
            Error::Docker { .. } => 69,
            Error::Hook { .. } => 70,
            Error::Io { .. } => 74,
            Error::Other(_) => 1,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn docker(action: impl Into<String>, err: impl fmt::Display) -> Self {
        let message = err.to_string();
        let hint = if message.contains("No such file or directory")
            || message.contains("Connection refused")
            || message.contains("connect")
        {
            Some("is the Docker Engine running? Start it (e.g. `sudo systemctl start docker`) and check with `yolo doctor`".into())
        } else {
            None
        };
        Error::Docker {
            action: action.into(),
            message,
            hint,
        }
    }

    pub fn other(message: impl Into<String>) -> Self {
        Error::Other(message.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config { file, line, column, property, message } => {
                write!(f, "{}", file.display())?;
                if let Some(line) = line {
                    write!(f, ":{line}")?;
                    if let Some(column) = column {
                        write!(f, ":{column}")?;
                    }
                }
                write!(f, ": ")?;
                if let Some(property) = property.as_deref().filter(|p| !p.is_empty() && *p != ".") {
                    write!(f, "\"{property}\": ")?;
                }
                write!(f, "{message}")
            }
            Error::Discovery(message) => write!(f, "{message}"),
            Error::Refused { file, property, value, reason, grant } => write!(
                f,
                "{}: \"{property}\" asks for {value}: {reason}; yolo refuses it unless you grant it: {grant}",
                file.display()
            ),
            Error::Forbidden { file, property, value, reason } => {
                write!(f, "{}: \"{property}\" asks for {value}: {reason}", file.display())
            }
            Error::Unsupported { file, property, message } => {
                write!(f, "{}: \"{property}\" is not supported yet: {message}", file.display())
            }
            Error::Docker { action, message, hint } => {
                write!(f, "docker: {action} failed: {message}")?;
                if let Some(hint) = hint {
                    write!(f, "\n  hint: {hint}")?;
                }
                Ok(())
            }
            Error::Hook { name, code } => write!(f, "{name} failed with exit code {code}"),
            Error::NotApproved(message) => write!(f, "{message}"),
            Error::ExitCode(code) => write!(f, "command exited with code {code}"),
            Error::UserConfig { file, message } => write!(f, "{}: {message}", file.display()),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Usage(message) | Error::Other(message) => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for Error {}
