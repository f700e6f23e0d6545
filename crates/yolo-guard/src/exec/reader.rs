//! Reads of a caller's memory under a deadline.
//!
//! Before an exec runs (and after one failed) the supervisor reads what the caller passed from
//! the caller's own memory. The caller chooses that memory: a page registered with
//! `userfaultfd` and never served holds a `process_vm_readv` of it in the kernel for as long as
//! the caller lives, and the wait is not interrupted by signals. Done on the supervisor's
//! thread, one such exec would hold every later exec of the agent. So these reads run on a
//! worker thread and the supervisor waits for the answer at most [`DEADLINE`]; a worker that
//! does not answer is left to its read (it ends when the caller does) and a new one serves the
//! next read. The new image's stack, read at the exec stop, is the kernel's and needs none of
//! this.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// How long the supervisor waits for one read.
pub const DEADLINE: Duration = Duration::from_millis(200);
/// Workers held by reads that never ended; past this, reads are not attempted (the record
/// says what it could not read) until some of them end.
const MAX_HELD: usize = 64;

type Job = Box<dyn FnOnce() + Send>;

struct Worker {
    jobs: mpsc::Sender<Job>,
    given_up: Arc<AtomicBool>,
}

pub struct Reader {
    worker: Option<Worker>,
    /// Workers given up on whose read has not ended yet.
    held: Arc<AtomicUsize>,
}

impl Reader {
    pub fn new() -> Reader {
        Reader {
            worker: None,
            held: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// `read()` on the worker, or `None` when it did not answer within [`DEADLINE`].
    pub fn run<T: Send + 'static>(
        &mut self,
        read: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        if self.held.load(Ordering::Relaxed) >= MAX_HELD {
            return None;
        }
        if self.worker.is_none() {
            self.worker = Some(self.spawn()?);
        }
        let worker = self.worker.as_ref()?;
        let (answer, answered) = mpsc::sync_channel(1);
        let job: Job = Box::new(move || {
            let _ = answer.send(read());
        });
        if worker.jobs.send(job).is_err() {
            self.worker = None;
            return None;
        }
        match answered.recv_timeout(DEADLINE) {
            Ok(value) => Some(value),
            Err(_) => {
                // This worker is the read's now (it ends once the read does); the next read
                // gets a new one.
                if let Some(worker) = self.worker.take() {
                    worker.given_up.store(true, Ordering::Relaxed);
                    self.held.fetch_add(1, Ordering::Relaxed);
                }
                None
            }
        }
    }

    fn spawn(&self) -> Option<Worker> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let given_up = Arc::new(AtomicBool::new(false));
        let (flag, held) = (Arc::clone(&given_up), Arc::clone(&self.held));
        std::thread::Builder::new()
            .name("yolo-exec-read".into())
            .spawn(move || {
                for job in queue {
                    job();
                }
                // Its sender is gone: given up on and now free, or the supervisor ended.
                if flag.load(Ordering::Relaxed) {
                    held.fetch_sub(1, Ordering::Relaxed);
                }
            })
            .ok()?;
        Some(Worker { jobs, given_up })
    }
}
