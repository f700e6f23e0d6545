//! The firewall's error: what kind of failure it is (the ruleset cannot be expressed, the
//! kernel refused it, the netlink socket failed, what the kernel holds differs from what was
//! applied), with its cause, so a caller decides by kind. The message is what the guard prints:
//! it names the object (the kernel's refusal names the message it refused).

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The batch holds something the netlink translator does not express (a statement, a set
    /// type, a value that does not fit its field): a change in `ruleset` the translator lacks,
    /// refused rather than mistranslated. Nothing was sent.
    #[error("{0}")]
    Translate(String),
    /// The kernel refused a message of a batch (the whole batch with it) or a dump: `what` the
    /// message was to do (`add set yolo net4`), and the errno it answered.
    #[error("the kernel refused to {what}: {source}")]
    KernelRefused {
        what: String,
        #[source]
        source: io::Error,
    },
    /// The NETLINK_NETFILTER socket failed (create, bind, send, receive, the 2 s wait): the
    /// kernel's answer never came.
    #[error("{doing} over netlink: {source}")]
    Socket {
        doing: &'static str,
        #[source]
        source: io::Error,
    },
    /// An answer of the kernel that is not netlink as the guard reads it.
    #[error("a malformed netlink answer")]
    Malformed,
    /// What the kernel holds differs from what was applied: what differs (the object named).
    #[error("{0}")]
    VerifyMismatch(String),
    /// What the seal reads of the namespace (its interfaces, their addresses, a random stamp)
    /// could not be read.
    #[error("cannot {doing}: {source}")]
    Host {
        doing: String,
        #[source]
        source: io::Error,
    },
    /// No interface of that name in the namespace.
    #[error("no interface {0}")]
    NoInterface(String),
    /// A queue of an interface could not be taken with an AF_XDP socket.
    #[error("cannot hold queue {queue} of {device} (AF_XDP): {source}")]
    XdpQueue {
        device: String,
        queue: u32,
        #[source]
        source: io::Error,
    },
    /// The blocking task of a netlink exchange did not finish (it panicked or was cancelled).
    #[error("netlink task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl Error {
    /// [`Error::Translate`]: `what` cannot be expressed as netlink messages.
    pub(crate) fn translate(what: impl Into<String>) -> Self {
        Error::Translate(what.into())
    }

    /// The errno the kernel answered, when it answered one (a refusal, or a socket's failure).
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::KernelRefused { source, .. }
            | Error::Socket { source, .. }
            | Error::XdpQueue { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}
