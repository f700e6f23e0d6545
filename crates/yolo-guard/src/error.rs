//! The guard's error for its config and files: what failed, phrased for the host's user who
//! reads it in the guard's output (`yolo up` prints it when the guard does not become ready).
//! The firewall's failures are `firewall::Error`, a failed start-up step `run::StartError`.
//! None of them names the program: `line` does, once, where `main` prints one.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
pub enum Error {
    /// The guard's config file is not valid JSON of the expected shape.
    Config { file: PathBuf, message: String },
    /// Reading or writing a file failed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Anything else (the file watcher's start), already phrased for a human.
    Other(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error as the guard prints it on stderr: the program's name, then the error's message.
pub fn line(error: &dyn fmt::Display) -> String {
    format!("yolo-guard: {error}")
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn other(message: impl Into<String>) -> Self {
        Error::Other(message.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config { file, message } => write!(f, "{}: {message}", file.display()),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Other(message) => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
