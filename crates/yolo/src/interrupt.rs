//! Ctrl-C (SIGINT), SIGTERM and SIGHUP. Once yolo listens for a signal the default action
//! (die at once) is gone, so `lib::run` races every command against [`received`]: a command
//! that has nothing to clean up ends at once with [`Error::Interrupted`]. Code that started
//! something it must undo — a command in the container, a half-made `yolo up` — holds a
//! [`Handled`] while it runs, watches [`received`] itself, cleans up and returns the error;
//! `run` gives it [`CLEANUP`] to do so, or ends at a second signal.
//!
//! What it does not do: kill anything. The engine stops its own commands (`Engine::exec`),
//! `bring_up::up` rolls back what it made.

use crate::error::Error;
pub(crate) use crate::signal::Signal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::watch;

/// How long a command that handles the signal may take to clean up before yolo ends anyway.
pub(crate) const CLEANUP: Duration = Duration::from_secs(30);

/// The signals received so far (their count and the last one).
fn channel() -> &'static watch::Sender<(usize, Option<Signal>)> {
    static CHANNEL: OnceLock<watch::Sender<(usize, Option<Signal>)>> = OnceLock::new();
    CHANNEL.get_or_init(|| watch::channel((0, None)).0)
}

/// How many [`Handled`] are alive.
static HANDLERS: AtomicUsize = AtomicUsize::new(0);

/// Start listening (inside the runtime; once per process).
pub(crate) fn listen() {
    #[cfg(unix)]
    for (kind, signal) in [
        (tokio::signal::unix::SignalKind::interrupt(), Signal::INT),
        (tokio::signal::unix::SignalKind::terminate(), Signal::TERM),
        (tokio::signal::unix::SignalKind::hangup(), Signal::HUP),
    ] {
        let Ok(mut stream) = tokio::signal::unix::signal(kind) else {
            continue;
        };
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                channel().send_modify(|(count, last)| {
                    *count += 1;
                    *last = Some(signal);
                });
            }
        });
    }
    #[cfg(not(unix))]
    tokio::spawn(async {
        while tokio::signal::ctrl_c().await.is_ok() {
            channel().send_modify(|(count, last)| {
                *count += 1;
                *last = Some(Signal::INT);
            });
        }
    });
}

/// The first signal: at once if one came already.
pub(crate) async fn received() -> Signal {
    nth(1).await
}

/// The `n`th signal received (1-based).
async fn nth(n: usize) -> Signal {
    let mut rx = channel().subscribe();
    // The value is copied out before any other wait, so the future holds no lock across one
    // (and can run on any thread).
    let seen = rx
        .wait_for(|(count, _)| *count >= n)
        .await
        .map(|seen| seen.1);
    match seen {
        Ok(seen) => seen.unwrap_or(Signal::INT),
        // The sender lives in a static: never dropped.
        Err(_) => std::future::pending().await,
    }
}

/// While alive, the code holding it stops what it started itself when a signal comes.
pub(crate) struct Handled(());

impl Handled {
    pub(crate) fn enter() -> Handled {
        HANDLERS.fetch_add(1, Ordering::SeqCst);
        Handled(())
    }
}

impl Drop for Handled {
    fn drop(&mut self) {
        HANDLERS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// After `signal`: the command's own result if it handles the signal and ends within
/// [`CLEANUP`] (and before a second signal), else [`Error::Interrupted`].
pub(crate) async fn finish<F>(signal: Signal, command: F) -> crate::error::Result<i32>
where
    F: std::future::Future<Output = crate::error::Result<i32>>,
{
    if HANDLERS.load(Ordering::SeqCst) == 0 {
        return Err(Error::interrupted(signal));
    }
    tokio::select! {
        result = tokio::time::timeout(CLEANUP, command) => {
            result.unwrap_or(Err(Error::interrupted(signal)))
        }
        again = nth(2) => Err(Error::interrupted(again)),
    }
}
