//! The one error type of yolo. Every variant's `Display` is written for a human: what failed,
//! where (file, line, property), and what to do about it. `code()` is the process exit status,
//! from BSD's sysexits where one fits; docs/configuration.md ("Exit codes") lists them.

use crate::visible::escape_controls;
use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
pub(crate) enum Error {
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
    /// Something else the command reads is not there: the workspace folder, a session's log.
    NotFound(String),
    /// A file the command would write exists already (`yolo init` without `--force`).
    Exists(PathBuf),
    /// The repository asks for something the user has not granted.
    Refused {
        file: PathBuf,
        property: String,
        value: String,
        reason: String,
        grant: String,
    },
    /// Several refusals of one config (each an `Error::Refused`, in the order met, and last
    /// perhaps what no grant allows), and the grants that would allow the refused ones.
    RefusedMany {
        refusals: Vec<Error>,
        grants: Vec<String>,
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
    /// Nothing of this workspace runs that the command could act on (exec, shell, allow, ...).
    NotRunning(String),
    /// Something yolo depends on does not work or cannot do what is asked: the firewall guard,
    /// git or Compose on this machine, a Kubernetes cluster, what a remote engine cannot do.
    /// `on` names it for a caller to match on; `cause` says what happened and what to do.
    Dependency {
        #[cfg_attr(
            not(test),
            expect(
                dead_code,
                reason = "no caller matches on a kind yet outside the tests; it is there for the first that needs to"
            )
        )]
        on: Dependency,
        cause: Cause,
    },
    /// A lifecycle hook or host command failed.
    Hook { name: String, code: i64 },
    /// A step of the project failed other than by a hook's exit code: `step` says which
    /// (initializeCommand could not start, the container stopped right after it started, the
    /// agent's setup failed), `cause` what happened.
    StepFailed {
        #[cfg_attr(
            not(test),
            expect(
                dead_code,
                reason = "no caller matches on a kind yet outside the tests; it is there for the first that needs to"
            )
        )]
        step: Step,
        cause: Cause,
    },
    /// The user declined a prompt, or a prompt was needed in a non-interactive run.
    NotApproved(String),
    /// The user's own config file is invalid.
    UserConfig { file: PathBuf, message: String },
    /// Reading or writing a local file failed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A command-line argument clap lets through but yolo cannot use (e.g. an unknown grant).
    Usage(String),
    /// A signal (Ctrl-C, SIGTERM, SIGHUP) ended the command; `stopped` names what yolo
    /// stopped in the container on the way out.
    Interrupted {
        signal: crate::signal::Signal,
        stopped: Option<String>,
    },
    /// `yolo sync` would overwrite something of the user's (a branch with commits of its own,
    /// the checked-out branch); resolve it and run again.
    Conflict(String),
    /// yolo could not do its own part of the work (write its own data, pack an archive, carry a
    /// copy to the engine) or met a value it cannot use: `what` says which, `cause` how.
    Failed {
        #[cfg_attr(
            not(test),
            expect(
                dead_code,
                reason = "no caller matches on a kind yet outside the tests; it is there for the first that needs to"
            )
        )]
        what: Failure,
        cause: Cause,
    },
    /// `error`, then lines of text it quotes (a container's last output, the configs found),
    /// each on its own indented line under `heading`. The one way an error spans lines: a
    /// line break inside any other value is shown escaped.
    WithLines {
        error: Box<Error>,
        heading: String,
        lines: Vec<String>,
    },
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// What `Error::Dependency` found not working: the thing yolo depends on, for a caller to
/// match on (the message says the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dependency {
    /// The firewall guard: not ready, no answer, refused a request, its events unreadable.
    Guard,
    /// A guard (or the exec audit's shim) for the engine's platform: this yolo carries none.
    GuardBinary,
    /// The shared guard network named in the config is not one yolo made.
    GuardNetwork,
    /// Docker Compose on this machine (`docker compose` or `docker-compose`).
    Compose,
    /// git on this machine, which the remote engine's copy comes back through.
    Git,
    /// `ssh`, which reaches an `ssh://` engine.
    Ssh,
    /// The docker CLI's config or context that names the engine.
    DockerContext,
    /// What a remote engine cannot do: bind host folders, run a Compose project, make the
    /// copy's paths read-only on its volume driver or engine.
    RemoteEngine,
    /// The copy of the workspace in the remote engine's volume: a path that cannot be named,
    /// an image volume over it, a copy that cannot be unpacked safely, its `.git` gone.
    WorkspaceCopy,
    /// The workspace or its copy is larger than `[workspace] sync_max_total`.
    SyncLimit,
    /// The engine dropped a resource limit yolo requires.
    Limits,
    /// The image lacks what the config needs (a command to run).
    Image,
    /// The agent's program is not installed in the image.
    AgentProgram,
    /// A Kubernetes cluster: none configured, or it failed or did not answer.
    Kubernetes,
    /// A Dev Container Feature cannot be fetched or read (a registry, a URL, a folder).
    Feature,
}

/// Which step of the project `Error::StepFailed` is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// A command of the config run on the host (`initializeCommand`) could not start or be
    /// waited for.
    HostCommand,
    /// The container stopped right after it started.
    ContainerExited,
    /// A command could not start in the container: its working folder is not there.
    WorkingFolder,
    /// The agent's setup in the container failed.
    AgentSetup,
}

/// What yolo itself could not do, in `Error::Failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Writing its own data as JSON or YAML.
    Serialize,
    /// Packing an archive in memory (the guard's config, the shim, a folder).
    Archive,
    /// Carrying an archive to or from the engine: the stream or its task stopped.
    Transfer,
    /// A background task or a process of yolo's own (itself, ssh, the keeper) ended or could
    /// not start.
    Process,
    /// Compose printed a project yolo cannot read.
    ComposeProject,
    /// A name yolo is handed is not one (a branch, a user, an image): it is not used.
    InvalidName,
    /// The allowlist: a preset that cannot be loaded, patterns that do not merge.
    Allowlist,
    /// What yolo's own state should hold is not there (no open session).
    State,
    /// Making a session's secrets: its CA for the guard's proxy, a credential's stand-in.
    SessionSecret,
}

/// Why something failed: yolo's words, and the error underneath when there is one, kept as
/// the error's `source()` for a caller to inspect (an `io::ErrorKind`, a status) rather than
/// read out of the message. Shown as `before`, the source's own text, `after`: the same line a
/// `format!` around the source would give.
#[derive(Debug)]
pub(crate) struct Cause {
    before: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    after: String,
}

impl Cause {
    /// `context`, then `: ` and the text of `source`.
    pub(crate) fn of(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Cause::around(format!("{}: ", context.into()), source, "")
    }

    /// `before`, the text of `source`, `after`: for a sentence that goes on past the source.
    pub(crate) fn around(
        before: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
        after: impl Into<String>,
    ) -> Self {
        Cause {
            before: before.into(),
            source: Some(Box::new(source)),
            after: after.into(),
        }
    }

    /// Only the text of `source`.
    pub(crate) fn bare(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Cause::around("", source, "")
    }

    /// The error underneath, if any.
    pub(crate) fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Words only: nothing underneath.
impl From<String> for Cause {
    fn from(text: String) -> Self {
        Cause {
            before: text,
            source: None,
            after: String::new(),
        }
    }
}

impl From<&str> for Cause {
    fn from(text: &str) -> Self {
        Cause::from(text.to_string())
    }
}

/// Each part escaped (the source's text is often the engine's or the container's): the
/// escaping is per character, so this is the escaping of the whole line.
impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", escape_controls(&self.before))?;
        if let Some(source) = &self.source {
            write!(f, "{}", escape_controls(&source.to_string()))?;
        }
        write!(f, "{}", escape_controls(&self.after))
    }
}

/// An error and its causes on one line, `outer: inner: ...` (an HTTP client's own message is
/// often only the outermost, "error sending request").
pub(crate) fn with_sources(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

/// `text` as one shell word: as it is when it holds only characters no shell treats specially,
/// else in single quotes (a grant's value can be a path the repository chose).
pub(crate) fn shell_word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-=:/.,@+%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

impl Error {
    /// Exit status of a usage error (EX_USAGE): a bad flag or value, caught before anything runs.
    pub(crate) const USAGE: i32 = 64;

    pub(crate) fn code(&self) -> i32 {
        match self {
            Error::Usage(_) => Error::USAGE,
            Error::Config { .. } | Error::UserConfig { .. } | Error::Unsupported { .. } => 65,
            Error::Discovery(_) | Error::NotFound(_) => 66,
            Error::Refused { .. }
            | Error::RefusedMany { .. }
            | Error::Forbidden { .. }
            | Error::NotApproved(_) => 77,
            Error::Docker { .. } | Error::NotRunning(_) | Error::Dependency { .. } => 69,
            Error::Hook { .. } | Error::StepFailed { .. } => 70,
            Error::Exists(_) => 73,
            Error::Conflict(_) => 75,
            Error::Io { .. } => 74,
            Error::Interrupted { signal, .. } => signal.exit_code(),
            Error::Failed { .. } => 1,
            Error::WithLines { error, .. } => error.code(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn docker(action: impl Into<String>, err: impl fmt::Display) -> Self {
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

    pub(crate) fn interrupted(signal: crate::signal::Signal) -> Self {
        Error::Interrupted {
            signal,
            stopped: None,
        }
    }

    /// `on` does not work: `cause` says how.
    pub(crate) fn dependency(on: Dependency, cause: impl Into<Cause>) -> Self {
        Error::Dependency {
            on,
            cause: cause.into(),
        }
    }

    /// `step` of the project failed: `cause` says how.
    pub(crate) fn step(step: Step, cause: impl Into<Cause>) -> Self {
        Error::StepFailed {
            step,
            cause: cause.into(),
        }
    }

    /// yolo could not do `what`: `cause` says how.
    pub(crate) fn failed(what: Failure, cause: impl Into<Cause>) -> Self {
        Error::Failed {
            what,
            cause: cause.into(),
        }
    }

    /// Whether an error of kind `T` is somewhere in the chain of causes below this one,
    /// inside an `io::Error` too: how a caller tells a marker error of its own from the rest
    /// without reading the message, which may quote a value that only looks like it.
    pub(crate) fn caused_by<T: std::error::Error + 'static>(&self) -> bool {
        use std::error::Error as _;
        std::iter::successors(self.source(), |e| (*e).source()).any(|e| {
            e.is::<T>()
                || e.downcast_ref::<std::io::Error>()
                    .and_then(std::io::Error::get_ref)
                    .is_some_and(|inner| inner.is::<T>())
        })
    }

    /// This error with `lines` it quotes (each escaped, one per line) under `heading`.
    pub(crate) fn with_lines(
        self,
        heading: impl Into<String>,
        lines: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Error::WithLines {
            error: Box::new(self),
            heading: heading.into(),
            lines: lines.into_iter().map(Into::into).collect(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Every value here may be the repository's, the container's or the engine's (a
        // devcontainer.json value, a file name, compose or guard output): each goes through the
        // one escaping, newlines included, so no constructor can forget it and no value can
        // start a line of its own. The only line breaks are the ones written here.
        let v = |text: &str| escape_controls(text);
        let p = |path: &std::path::Path| escape_controls(&path.display().to_string());
        match self {
            Error::Config {
                file,
                line,
                column,
                property,
                message,
            } => {
                write!(f, "{}", p(file))?;
                if let Some(line) = line {
                    write!(f, ":{line}")?;
                    if let Some(column) = column {
                        write!(f, ":{column}")?;
                    }
                }
                write!(f, ": ")?;
                if let Some(property) = property.as_deref().filter(|p| !p.is_empty() && *p != ".") {
                    write!(f, "\"{}\": ", v(property))?;
                }
                write!(f, "{}", v(message))
            }
            Error::Discovery(message) | Error::NotFound(message) => write!(f, "{}", v(message)),
            Error::Exists(path) => write!(
                f,
                "{} already exists; pass --force to overwrite it",
                p(path)
            ),
            Error::Refused {
                file,
                property,
                value,
                reason,
                grant,
            } => write!(
                f,
                "{}: \"{}\" asks for {}: {}; yolo refuses it unless you grant it: {}",
                p(file),
                v(property),
                v(value),
                v(reason),
                v(grant)
            ),
            Error::RefusedMany { refusals, grants } => {
                let forbidden = refusals
                    .iter()
                    .filter(|e| matches!(e, Error::Forbidden { .. }))
                    .count();
                let grantable = refusals.len() - forbidden;
                let requests = |n: usize| if n == 1 { "request" } else { "requests" };
                match (forbidden, grantable) {
                    (0, 1) => write!(f, "1 request needs a grant:")?,
                    (0, n) => write!(f, "{n} requests need a grant:")?,
                    (n, 0) => write!(f, "{n} {} no grant allows:", requests(n))?,
                    (n, m) => write!(
                        f,
                        "{n} {} no grant allows, and {m} that {} a grant:",
                        requests(n),
                        if m == 1 { "needs" } else { "need" }
                    )?,
                }
                for refusal in refusals {
                    write!(f, "\n  - {refusal}")?;
                }
                if grants.is_empty() {
                    return Ok(());
                }
                let flags: Vec<String> = grants
                    .iter()
                    .map(|g| format!("--grant {}", v(&shell_word(g))))
                    .collect();
                write!(f, "\n  the grants they need: {}", flags.join(" "))
            }
            Error::Forbidden {
                file,
                property,
                value,
                reason,
            } => {
                write!(
                    f,
                    "{}: \"{}\" asks for {}: {}",
                    p(file),
                    v(property),
                    v(value),
                    v(reason)
                )
            }
            Error::Unsupported {
                file,
                property,
                message,
            } => {
                write!(
                    f,
                    "{}: \"{}\" is not supported yet: {}",
                    p(file),
                    v(property),
                    v(message)
                )
            }
            Error::Docker {
                action,
                message,
                hint,
            } => {
                write!(f, "docker: {} failed: {}", v(action), v(message))?;
                if let Some(hint) = hint {
                    write!(f, "\n  hint: {}", v(hint))?;
                }
                Ok(())
            }
            Error::NotRunning(message) => write!(f, "{}", v(message)),
            // The cause escapes its parts itself.
            Error::Dependency { cause, .. }
            | Error::StepFailed { cause, .. }
            | Error::Failed { cause, .. } => write!(f, "{cause}"),
            Error::Hook { name, code } => write!(f, "{} failed with exit code {code}", v(name)),
            Error::Conflict(message) => write!(f, "{}", v(message)),
            Error::NotApproved(message) => write!(f, "{}", v(message)),
            // The user's own file: the parser's own lines (the snippet under the message) are
            // kept as lines, each escaped.
            Error::UserConfig { file, message } => {
                let mut lines = message.lines();
                write!(f, "{}: {}", p(file), v(lines.next().unwrap_or_default()))?;
                lines.try_for_each(|line| write!(f, "\n{}", v(line)))
            }
            Error::Io { path, source } => write!(f, "{}: {}", p(path), v(&source.to_string())),
            Error::Interrupted {
                signal,
                stopped: None,
            } => write!(f, "interrupted ({})", signal.name()),
            Error::Interrupted {
                signal,
                stopped: Some(what),
            } => {
                write!(
                    f,
                    "interrupted ({}); stopped {} in the container",
                    signal.name(),
                    v(what)
                )
            }
            Error::Usage(message) => write!(f, "{}", v(message)),
            Error::WithLines {
                error,
                heading,
                lines,
            } => {
                write!(f, "{error}\n  {}:", v(heading))?;
                for line in lines {
                    write!(f, "\n    {}", v(line))?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Dependency { cause, .. }
            | Error::StepFailed { cause, .. }
            | Error::Failed { cause, .. } => cause.source(),
            Error::WithLines { error, .. } => error.source(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    fn refused_twin() -> Error {
        Error::Refused {
            file: "d.json".into(),
            property: "p".into(),
            value: "v".into(),
            reason: "r".into(),
            grant: "g".into(),
        }
    }

    #[test]
    fn every_class_has_its_documented_exit_code() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let config = Error::Config {
            file: "d.json".into(),
            line: None,
            column: None,
            property: None,
            message: "m".into(),
        };
        let refused = Error::Refused {
            file: "d.json".into(),
            property: "p".into(),
            value: "v".into(),
            reason: "r".into(),
            grant: "g".into(),
        };
        let many = Error::RefusedMany {
            refusals: vec![refused_twin()],
            grants: vec!["host-mount=/a b".into()],
        };
        assert_eq!(many.code(), 77);
        // A value the repository chose is one shell word in the line meant to be pasted.
        assert!(
            many.to_string().ends_with("--grant 'host-mount=/a b'"),
            "{many}"
        );
        let unsupported = Error::Unsupported {
            file: "d.json".into(),
            property: "p".into(),
            message: "m".into(),
        };
        let user_config = Error::UserConfig {
            file: "config.toml".into(),
            message: "m".into(),
        };
        let hook = Error::Hook {
            name: "postCreateCommand".into(),
            code: 3,
        };
        let codes = [
            (Error::Usage("u".into()), 64),
            (config, 65),
            (user_config, 65),
            (unsupported, 65),
            (Error::Discovery("d".into()), 66),
            (Error::NotFound("n".into()), 66),
            (Error::docker("pulling", "no"), 69),
            (Error::NotRunning("n".into()), 69),
            (Error::dependency(Dependency::Guard, "u"), 69),
            (hook, 70),
            (
                Error::StepFailed {
                    step: Step::AgentSetup,
                    cause: "c".into(),
                },
                70,
            ),
            (Error::Exists("f".into()), 73),
            (Error::Conflict("c".into()), 75),
            (Error::io("f", io()), 74),
            (refused, 77),
            (Error::NotApproved("n".into()), 77),
            (Error::interrupted(crate::signal::Signal::INT), 130),
            (Error::interrupted(crate::signal::Signal::TERM), 143),
            (
                Error::Failed {
                    what: Failure::State,
                    cause: "bug".into(),
                },
                1,
            ),
            (Error::dependency(Dependency::Git, "g"), 69),
            (Error::step(Step::ContainerExited, "c"), 70),
            (Error::failed(Failure::Serialize, "s"), 1),
        ];
        for (error, code) in codes {
            assert_eq!(error.code(), code, "{error:?}");
        }
    }

    #[test]
    fn an_io_error_names_the_path_and_keeps_its_cause() {
        let error = Error::io(
            "/x/state.json",
            std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied"),
        );
        assert_eq!(error.to_string(), "/x/state.json: denied");
        let source = error.source().expect("the io error");
        assert_eq!(source.to_string(), "denied");
        assert!(Error::Failed {
            what: Failure::State,
            cause: "x".into(),
        }
        .source()
        .is_none());
    }

    /// The message a typed error prints is the line the `format!` around its source printed
    /// before, and the source is there for a caller to inspect instead of the words.
    #[test]
    fn a_cause_prints_as_before_and_keeps_its_source() {
        let missing = || std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let error = Error::dependency(
            Dependency::Git,
            Cause::around("git could not be run (", missing(), "): install git"),
        );
        assert_eq!(
            error.to_string(),
            format!("git could not be run ({}): install git", missing())
        );
        let io = error
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("the io error as the source");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert!(matches!(
            error,
            Error::Dependency {
                on: Dependency::Git,
                ..
            }
        ));

        let error = Error::step(
            Step::HostCommand,
            Cause::of("initializeCommand: could not run \"x\"", missing()),
        );
        assert_eq!(
            error.to_string(),
            "initializeCommand: could not run \"x\": No such file"
        );
        let bare = Error::failed(Failure::Serialize, Cause::bare(missing()));
        assert_eq!(bare.to_string(), "No such file");
        assert!(bare.source().is_some());
        let words = Error::failed(Failure::State, "no open session");
        assert_eq!(words.to_string(), "no open session");
        assert!(words.source().is_none());

        // Under lines: the kind and the source stay reachable.
        let lined = Error::dependency(Dependency::Guard, Cause::of("the guard", missing()))
            .with_lines("guard output", ["starting"]);
        let Error::WithLines { error, .. } = &lined else {
            panic!("{lined:?}")
        };
        assert!(matches!(
            **error,
            Error::Dependency {
                on: Dependency::Guard,
                ..
            }
        ));
        assert!(lined.source().is_some());
        assert_eq!(lined.code(), 69);
    }

    /// ATTACK: the text of a source is the engine's, the container's or a file's; a line
    /// break or an escape sequence in it cannot start a line of its own or reach the terminal.
    #[test]
    fn a_sources_text_is_escaped_like_every_value() {
        let hostile = std::io::Error::other("gone\nyolo: all clear\x1b[2J");
        let error = Error::dependency(
            Dependency::Guard,
            Cause::around("the guard (", hostile, ")\nsays"),
        );
        let text = error.to_string();
        assert_eq!(text, "the guard (gone\\nyolo: all clear\\x1b[2J)\\nsays");
        assert!(!text.contains('\n') && !text.contains('\x1b'), "{text}");
    }

    #[derive(Debug)]
    struct Marker;

    impl fmt::Display for Marker {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the upload ended")
        }
    }

    impl std::error::Error for Marker {}

    /// ATTACK: a caller tells its own marker from other failures by type, inside an io error
    /// too; a message (a path of the repository) that only reads like the marker is not it.
    #[test]
    fn caused_by_finds_the_marker_not_its_words() {
        let marked = Error::io(
            "/w/a",
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, Marker),
        );
        assert!(marked.caused_by::<Marker>());
        let in_cause = Error::failed(
            Failure::Transfer,
            Cause::of(
                "copying",
                std::io::Error::new(std::io::ErrorKind::BrokenPipe, Marker),
            ),
        )
        .with_lines("x", ["y"]);
        assert!(in_cause.caused_by::<Marker>());
        let lookalike = Error::dependency(
            Dependency::SyncLimit,
            "the repository is larger than 1 GiB (at the upload ended/big.img)",
        );
        assert!(!lookalike.caused_by::<Marker>());
        let worded = Error::io(
            "/w/the upload ended",
            std::io::Error::other("the upload ended"),
        );
        assert!(!worded.caused_by::<Marker>());
    }

    #[test]
    fn exists_says_how_to_overwrite() {
        assert_eq!(
            Error::Exists("/r/.devcontainer/Dockerfile".into()).to_string(),
            "/r/.devcontainer/Dockerfile already exists; pass --force to overwrite it"
        );
    }
}
