//! `yolo audit ship SESSION` (hidden; `up` starts it in the background when the user config
//! has `[audit] otlp_endpoint` or `ocsf_file`): follows the session's log files as `yolo audit
//! --follow` does and sends each new event on, until the session stops.
//!
//! Why it cannot slow the agent or lose a local record: it only reads the files the guard and
//! the CLI write, in a process of its own; nothing that writes the log waits for it. Between
//! its reader and each sender is a bounded queue ([`QUEUE`] records): when a collector is slow
//! or gone and the queue is full, new records are dropped from the export (never from the
//! log) and counted. A batch the collector refuses or does not answer within [`SEND_TIMEOUT`]
//! counts as failed. The counts, and how far each file was read, are in the session folder's
//! `export.json` ([`Status`]), rewritten every 2 s and at the end: `yolo audit` warns when
//! records were dropped or failed, and a shipper started again for the same session (a second
//! `up`) goes on from where the last one was. One shipper per session (a lock on
//! `export.lock`).
//!
//! Where it goes on from: the offsets saved are those up to which every record was handed on
//! (sent, failed or dropped, and counted), not those read ([`Settled`]). A shipper killed with
//! records in its queues (the machine shut down, `kill -9`) leaves them unsaved, and the next
//! one sends them again: a record may reach the collector twice, none is lost uncounted.

use super::{ocsf, otlp, Context};
use crate::audit::reader::Tail;
use crate::audit::EventKind;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Records waiting for each sender at most.
pub(crate) const QUEUE: usize = 10_000;
/// Bytes waiting for each sender at most: an exec record can carry 128 KiB of arguments, so
/// a count alone would let a flood of long command lines hold gigabytes.
pub(crate) const QUEUE_BYTES: u64 = 64 << 20;
/// Records per OTLP request at most.
const BATCH: usize = 512;
/// Bytes per OTLP request at most (collectors refuse large bodies; 4 MiB is gRPC's default).
const BATCH_BYTES: usize = 4 << 20;
/// How long a batch waits for more records.
const LINGER: Duration = Duration::from_secs(1);
/// How long one OTLP request may take before it counts as failed.
pub(crate) const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// After the session stopped: how long the guard's last records are waited for.
const SETTLE: Duration = Duration::from_secs(3);
/// At the end: how long the senders may take to empty their queues.
const DRAIN: Duration = Duration::from_secs(15);

/// Where the events go.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Sinks {
    /// OTLP/HTTP collector: `http(s)://HOST:PORT`, `/v1/logs` appended unless given.
    pub(crate) otlp_endpoint: Option<String>,
    /// A file OCSF records are appended to, one per line.
    pub(crate) ocsf_file: Option<PathBuf>,
}

impl Sinks {
    pub(crate) fn any(&self) -> bool {
        self.otlp_endpoint.is_some() || self.ocsf_file.is_some()
    }
}

/// The counts of one sink.
#[derive(Debug, Default, Serialize, Deserialize, Clone, PartialEq)]
pub(crate) struct SinkStatus {
    pub(crate) target: String,
    /// Records the sink took (the collector answered 2xx; the file was written).
    pub(crate) sent: u64,
    /// Records left out of the export because its queue was full.
    pub(crate) dropped: u64,
    /// Records in batches the collector refused or did not answer (or the file did not take).
    pub(crate) failed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_error: Option<String>,
}

/// `export.json` in the session's folder.
#[derive(Debug, Default, Serialize, Deserialize, Clone, PartialEq)]
pub(crate) struct Status {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) otlp: Option<SinkStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ocsf: Option<SinkStatus>,
    /// How far each of the session's files was read (bytes), in `session_files` order.
    #[serde(default)]
    pub(crate) offsets: Vec<u64>,
    /// The session stopped and everything read was handed on (or counted).
    #[serde(default)]
    pub(crate) done: bool,
}

impl Status {
    pub(crate) fn path(session: &str) -> PathBuf {
        crate::audit::session_dir(session).join("export.json")
    }

    pub(crate) fn load(session: &str) -> Option<Status> {
        let text = std::fs::read_to_string(Status::path(session)).ok()?;
        serde_json::from_str(&text).ok()
    }

    fn save(&self, session: &str) {
        let text = serde_json::to_vec_pretty(self).unwrap_or_default();
        let _ = crate::store::replace(&Status::path(session), &text);
    }

    /// What `yolo audit` warns about: records the export lost.
    pub(crate) fn losses(&self) -> Option<String> {
        let lost: Vec<String> = [("OpenTelemetry", &self.otlp), ("OCSF", &self.ocsf)]
            .into_iter()
            .filter_map(|(name, s)| {
                let s = s.as_ref()?;
                (s.dropped + s.failed > 0).then(|| {
                    format!(
                        "{name} export to {}: {} records dropped (queue full), {} failed{}",
                        s.target,
                        s.dropped,
                        s.failed,
                        s.last_error
                            .as_deref()
                            .map(|e| format!(" (last error: {e})"))
                            .unwrap_or_default()
                    )
                })
            })
            .collect();
        (!lost.is_empty()).then(|| format!("{}; the local log has every record", lost.join("; ")))
    }
}

/// The counters a sender and the reader share.
#[derive(Default)]
struct Counts {
    /// In the queue now (records, bytes).
    queued: AtomicU64,
    queued_bytes: AtomicU64,
    sent: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
    last_error: std::sync::Mutex<Option<String>>,
    /// The number of the last record the sender finished (sent, or counted as failed).
    done: AtomicU64,
}

impl Counts {
    /// Records up to number `seq` (`n` of them, `bytes` long) left the queue.
    fn finished(&self, seq: u64, n: u64, bytes: u64) {
        self.done.fetch_max(seq, Ordering::Release);
        self.queued.fetch_sub(n, Ordering::Release);
        self.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    fn status(&self, target: &str) -> SinkStatus {
        SinkStatus {
            target: target.to_string(),
            sent: self.sent.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            last_error: self.last_error.lock().ok().and_then(|e| e.clone()),
        }
    }

    fn failed(&self, n: u64, error: String) {
        self.failed.fetch_add(n, Ordering::Relaxed);
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(error);
        }
    }
}

/// Whether `path` is in `workspace` (the agent can write there: a link planted at the path
/// would send the records into a file the host runs). Compared by the folders as they are on
/// disk, links resolved.
pub(crate) fn inside(path: &Path, workspace: &Path) -> bool {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let folder = path.parent().map(real).unwrap_or_default();
    folder.starts_with(real(workspace))
}

/// The URL OTLP/HTTP logs are posted to.
pub(crate) fn logs_url(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    if trimmed.ends_with("/v1/logs") {
        trimmed.to_string()
    } else {
        format!("{trimmed}/v1/logs")
    }
}

/// Check `[audit] otlp_endpoint`: an `http://` or `https://` URL with a host.
pub(crate) fn check_endpoint(endpoint: &str) -> Result<(), String> {
    let url =
        reqwest::Url::parse(endpoint).map_err(|e| format!("{endpoint:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "{endpoint:?} is not an http:// or https:// URL with a host (OTLP over HTTP, like http://127.0.0.1:4318)"
        ));
    }
    Ok(())
}

/// A record in a sink's queue: its size in bytes and its number in the reader's order.
type Queued<T> = (T, u64, u64);

/// One sink's end of the reader: its queue, counts and sending task.
struct Sink<T> {
    target: String,
    tx: Option<mpsc::Sender<Queued<T>>>,
    counts: Arc<Counts>,
    task: tokio::task::JoinHandle<()>,
    /// The number of the last record offered.
    offered: u64,
}

impl<T> Sink<T> {
    fn new(
        target: String,
        old: Option<&SinkStatus>,
        start: impl FnOnce(mpsc::Receiver<Queued<T>>, Arc<Counts>) -> tokio::task::JoinHandle<()>,
    ) -> Sink<T> {
        let counts = Arc::new(Counts::default());
        if let Some(old) = old {
            counts.sent.store(old.sent, Ordering::Relaxed);
            counts.dropped.store(old.dropped, Ordering::Relaxed);
            counts.failed.store(old.failed, Ordering::Relaxed);
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        let task = start(rx, Arc::clone(&counts));
        Sink {
            target,
            tx: Some(tx),
            counts,
            task,
            offered: 0,
        }
    }

    /// Queue `record` (`bytes` long, number `seq`), or count it dropped when the queue is full.
    fn offer(&mut self, record: T, bytes: u64, seq: u64) {
        self.offered = seq;
        let room = self.counts.queued_bytes.load(Ordering::Relaxed) + bytes <= QUEUE_BYTES;
        let queued = room
            && self
                .tx
                .as_ref()
                .is_some_and(|tx| tx.try_send((record, bytes, seq)).is_ok());
        if queued {
            self.counts.queued.fetch_add(1, Ordering::Relaxed);
            self.counts.queued_bytes.fetch_add(bytes, Ordering::Relaxed);
        } else {
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn status(&self) -> SinkStatus {
        self.counts.status(&self.target)
    }

    /// The number up to which every record offered was handed on and counted: all of them
    /// when the queue is empty, else up to the last one the sender finished (it takes them in
    /// order; a record dropped before that was counted when it was dropped).
    fn handled(&self) -> u64 {
        // `queued` is lowered after `done` is raised: an empty queue means all were finished.
        if self.counts.queued.load(Ordering::Acquire) == 0 {
            self.offered
        } else {
            self.counts.done.load(Ordering::Acquire)
        }
    }

    /// Wait for the sender (its queue closed: `tx` dropped) to empty it until `deadline`;
    /// what it could not send by then counts as failed.
    async fn wait(&mut self, deadline: tokio::time::Instant) {
        if tokio::time::timeout_at(deadline, &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
            let left = self.counts.queued.swap(0, Ordering::Relaxed);
            self.counts.failed(
                left,
                "the collector did not take them before the session ended".into(),
            );
        }
    }
}

/// Follow `session`'s files and ship every event to `sinks` until the session stops.
pub(crate) async fn run(context: Context, sinks: Sinks) -> std::io::Result<()> {
    let session = context.session.clone();
    let dir = crate::audit::session_dir(&session);
    std::fs::create_dir_all(&dir)?;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("export.lock"))?;
    if lock.try_lock().is_err() {
        return Ok(()); // another shipper has this session
    }
    let before = Status::load(&session).unwrap_or_default();
    if before.done {
        return Ok(());
    }
    let mut tail = Tail::new(crate::audit::session_files(&session));
    tail.resume(&before.offsets);

    let mut otlp = sinks.otlp_endpoint.as_ref().map(|endpoint| {
        let url = logs_url(endpoint);
        let context = context.clone();
        Sink::new(endpoint.clone(), before.otlp.as_ref(), move |rx, counts| {
            tokio::spawn(send_otlp(url, context, rx, counts))
        })
    });
    let mut ocsf = sinks.ocsf_file.as_ref().map(|path| {
        let path = path.clone();
        Sink::new(
            path.display().to_string(),
            before.ocsf.as_ref(),
            move |rx, counts| tokio::spawn(write_ocsf(path, rx, counts)),
        )
    });
    let status =
        |offsets: Vec<u64>, otlp: &Option<Sink<_>>, ocsf: &Option<Sink<String>>, done| Status {
            otlp: otlp.as_ref().map(Sink::status),
            ocsf: ocsf.as_ref().map(Sink::status),
            offsets,
            done,
        };

    let mut stopped: Option<Instant> = None;
    let mut saved = Instant::now();
    let mut seq = 0u64;
    let mut settled = Settled::new(tail.offsets());
    loop {
        let mut seen = false;
        for event in tail.poll() {
            seen = true;
            seq += 1;
            if matches!(event.kind, EventKind::SessionStop { .. }) {
                stopped.get_or_insert_with(Instant::now);
            }
            if let Some(sink) = &mut otlp {
                let record = otlp::record(&event);
                let bytes = prost::Message::encoded_len(&record) as u64;
                sink.offer(record, bytes, seq);
            }
            if let Some(sink) = &mut ocsf {
                let line = ocsf::record(&context, &event).to_string();
                let bytes = line.len() as u64;
                sink.offer(line, bytes, seq);
            }
        }
        if seen {
            settled.read(seq, tail.offsets());
        }
        if saved.elapsed() >= Duration::from_secs(2) {
            if !dir.exists() {
                // The data folder was removed (the session with it): nothing left to follow.
                return Ok(());
            }
            let handled = [
                otlp.as_ref().map(Sink::handled),
                ocsf.as_ref().map(Sink::handled),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(seq);
            let offsets = settled.handled(handled).to_vec();
            status(offsets, &otlp, &ocsf, false).save(&session);
            saved = Instant::now();
        }
        match stopped {
            Some(at) if !seen && at.elapsed() >= SETTLE => break,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    // Both queues closed first, so both senders drain within the same DRAIN.
    let deadline = tokio::time::Instant::now() + DRAIN;
    if let Some(sink) = &mut otlp {
        sink.tx = None;
    }
    if let Some(sink) = &mut ocsf {
        sink.tx = None;
    }
    if let Some(sink) = &mut otlp {
        sink.wait(deadline).await;
    }
    if let Some(sink) = &mut ocsf {
        sink.wait(deadline).await;
    }
    // Every record read was handed on or counted by now.
    status(tail.offsets(), &otlp, &ocsf, true).save(&session);
    Ok(())
}

/// How far the files were read when record number `seq` was the last one read, for the
/// offsets to save: those of the last point up to which every record was handed on.
struct Settled {
    /// The offsets saved (every record before them handed on).
    at: Vec<u64>,
    /// Later points, oldest first: `(last record's number, offsets after it)`.
    later: std::collections::VecDeque<(u64, Vec<u64>)>,
}

impl Settled {
    fn new(offsets: Vec<u64>) -> Settled {
        Settled {
            at: offsets,
            later: Default::default(),
        }
    }

    /// Records up to `seq` were read, and the files up to `offsets`.
    fn read(&mut self, seq: u64, offsets: Vec<u64>) {
        self.later.push_back((seq, offsets));
    }

    /// Every record up to `handled` was handed on: the offsets that may be saved.
    fn handled(&mut self, handled: u64) -> &[u64] {
        while self.later.front().is_some_and(|(seq, _)| *seq <= handled) {
            if let Some((_, offsets)) = self.later.pop_front() {
                self.at = offsets;
            }
        }
        &self.at
    }
}

/// The OTLP sender: batches of up to [`BATCH`] records (or what came within [`LINGER`]),
/// posted as protobuf; a batch that fails is counted, not retried (the next one may work).
async fn send_otlp(
    url: String,
    context: Context,
    mut rx: mpsc::Receiver<Queued<opentelemetry_proto::tonic::logs::v1::LogRecord>>,
    counts: Arc<Counts>,
) {
    let client = match reqwest::Client::builder()
        .timeout(SEND_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            counts.failed(0, e.to_string());
            return;
        }
    };
    while let Some((first, first_bytes, first_seq)) = rx.recv().await {
        let mut batch = vec![first];
        let mut bytes = first_bytes;
        let mut last = first_seq;
        let until = tokio::time::Instant::now() + LINGER;
        while batch.len() < BATCH && (bytes as usize) < BATCH_BYTES {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some((record, size, seq))) => {
                    batch.push(record);
                    bytes += size;
                    last = seq;
                }
                _ => break,
            }
        }
        let n = batch.len() as u64;
        let body = otlp::encode(&otlp::request(&context, batch));
        let sent = client
            .post(&url)
            .header("content-type", "application/x-protobuf")
            .body(body)
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => {
                counts.sent.fetch_add(n, Ordering::Relaxed);
            }
            Ok(r) => counts.failed(n, format!("the collector answered {}", r.status())),
            Err(e) => counts.failed(n, crate::error::with_sources(&e)),
        }
        // Out of the queue only now: a batch cut off at the end is counted with what is left.
        counts.finished(last, n, bytes);
    }
}

/// The OCSF writer: appends each record as a line.
async fn write_ocsf(path: PathBuf, mut rx: mpsc::Receiver<Queued<String>>, counts: Arc<Counts>) {
    use tokio::io::AsyncWriteExt;
    // Not through a link: the file is the user's, named in their config.
    let opened = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .await;
    let mut file = match opened {
        Ok(f) => f,
        Err(e) => {
            let error = format!("{}: {e}", path.display());
            while let Some((_, bytes, seq)) = rx.recv().await {
                counts.failed(1, error.clone());
                counts.finished(seq, 1, bytes);
            }
            return;
        }
    };
    while let Some((mut line, bytes, seq)) = rx.recv().await {
        line.push('\n');
        // Flushed each time: `sent` means in the file, not in a buffer.
        let written = match file.write_all(line.as_bytes()).await {
            Ok(()) => file.flush().await,
            Err(e) => Err(e),
        };
        match written {
            Ok(()) => {
                counts.sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => counts.failed(1, format!("{}: {e}", path.display())),
        }
        counts.finished(seq, 1, bytes);
    }
}

/// Start the shipper for `session` in the background, detached from this terminal (it
/// outlives `up`), its own errors in the session folder's `export.log`.
/// `copy`: the named session it is a log of (its guard's events are copied from its volume).
pub(crate) fn spawn(
    session: &str,
    workspace: &Path,
    config_file: &Path,
    copy: Option<&str>,
) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    let dir = crate::audit::session_dir(session);
    std::fs::create_dir_all(&dir)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("export.log"))?;
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command
        .args(["audit", "ship", session, "--workspace"])
        .arg(workspace)
        .arg("--config")
        .arg(config_file);
    if let Some(name) = copy {
        command.args(["--copy", name]);
    }
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .current_dir("/")
        .process_group(0)
        .spawn()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_in_the_workspace_is_seen_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("logs")).unwrap();
        std::os::unix::fs::symlink(ws.join("logs"), dir.path().join("outside")).unwrap();
        assert!(inside(&ws.join("logs/ocsf.jsonl"), &ws));
        assert!(inside(&dir.path().join("outside/ocsf.jsonl"), &ws));
        assert!(!inside(&dir.path().join("ocsf.jsonl"), &ws));
    }

    #[test]
    fn the_offsets_saved_are_those_up_to_which_every_record_was_handed_on() {
        let mut settled = Settled::new(vec![10, 0]);
        settled.read(3, vec![40, 0]);
        settled.read(5, vec![40, 70]);
        settled.read(9, vec![90, 70]);
        assert_eq!(settled.handled(0), [10, 0], "nothing handed on yet");
        assert_eq!(
            settled.handled(4),
            [40, 0],
            "records 4 and 5 are still queued"
        );
        assert_eq!(settled.handled(4), [40, 0]);
        assert_eq!(settled.handled(9), [90, 70]);
        assert_eq!(settled.handled(12), [90, 70], "nothing newer was read");
    }

    #[tokio::test]
    async fn a_sink_has_handed_on_what_its_sender_finished_or_all_when_its_queue_is_empty() {
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        let mut sink: Sink<String> = Sink::new("test".into(), None, move |mut rx, counts| {
            tokio::spawn(async move {
                let _ = wait.await;
                while let Some((_, bytes, seq)) = rx.recv().await {
                    counts.sent.fetch_add(1, Ordering::Relaxed);
                    counts.finished(seq, 1, bytes);
                    if seq == 2 {
                        return;
                    }
                }
            })
        });
        assert_eq!(sink.handled(), 0);
        for seq in 1..=3 {
            sink.offer(format!("record {seq}"), 8, seq);
        }
        assert_eq!(sink.handled(), 0, "all three still queued");
        release.send(()).unwrap();
        (&mut sink.task).await.unwrap();
        assert_eq!(sink.handled(), 2, "the third is still queued");
    }

    #[test]
    fn the_logs_url_is_the_endpoint_with_v1_logs_once() {
        assert_eq!(logs_url("http://c:4318"), "http://c:4318/v1/logs");
        assert_eq!(logs_url("http://c:4318/v1/logs/"), "http://c:4318/v1/logs");
        assert!(check_endpoint("ftp://c").is_err());
        assert!(check_endpoint("http://127.0.0.1:4318").is_ok());
    }
}
