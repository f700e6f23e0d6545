//! Running commands in a container: attached to the terminal (TTY, raw mode, window resize),
//! with plain pipes, with each line prefixed by a hook's name, or captured.

use super::{message, Engine};
use crate::error::{Error, Result, Step};
use crate::interrupt;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, ResizeExecOptions, StartExecOptions, StartExecResults};
use futures_util::StreamExt;
use std::io::Write;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use yolo_protocol::SHIM_PATH;

/// The environment variable that marks the processes of one command yolo runs.
const EXEC_MARK: &str = "YOLO_EXEC_ID";

/// `$1` is `YOLO_EXEC_ID=<id>`: the processes whose environment holds it get SIGTERM, and
/// those still there after two seconds SIGKILL (an interactive shell ignores SIGTERM).
const STOP_SCRIPT: &str = r#"command -v tr >/dev/null 2>&1 && command -v grep >/dev/null 2>&1 || exit 3
marked() {
  for p in /proc/[0-9]*; do
    if tr '\0' '\n' < "$p/environ" 2>/dev/null | grep -qxF "$1"; then echo "${p#/proc/}"; fi
  done
}
pids=$(marked "$1")
[ -n "$pids" ] || exit 0
kill -TERM $pids 2>/dev/null
i=0
while [ $i -lt 20 ]; do
  sleep 0.1 2>/dev/null || sleep 1
  pids=$(marked "$1")
  [ -n "$pids" ] || exit 0
  i=$((i + 1))
done
kill -KILL $pids 2>/dev/null
sleep 0.2 2>/dev/null || sleep 1
[ -z "$(marked "$1")" ]"#;

/// How long stopping an interrupted command may take.
const STOP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Debug, Clone, Default)]
pub(crate) struct ExecRequest {
    pub(crate) argv: Vec<String>,
    pub(crate) user: Option<String>,
    pub(crate) cwd: Option<String>,
    pub(crate) env: Vec<String>,
    /// Allocate a TTY (stdin is a terminal).
    pub(crate) tty: bool,
    /// Forward our stdin.
    pub(crate) stdin: bool,
    /// Start through the exec audit's shim (`ContainerDetails::supervised`): the container's
    /// every command must, or the guard records it as unsupervised.
    pub(crate) supervised: bool,
}

impl ExecRequest {
    /// The argv Docker runs: the shim first when supervised.
    fn command(&self, argv: &[String]) -> Vec<String> {
        self.command_with(&[], argv)
    }

    /// [`command`](Self::command) with the shim's `flags` before the program.
    fn command_with(&self, flags: &[&str], argv: &[String]) -> Vec<String> {
        if !self.supervised {
            return argv.to_vec();
        }
        let mut command = vec![SHIM_PATH.to_string(), "shim".into()];
        command.extend(flags.iter().map(|f| f.to_string()));
        command.extend(argv.iter().cloned());
        command
    }
}

/// Where a command's output goes.
#[derive(Debug, Clone)]
pub(crate) enum Output {
    /// Our stdout/stderr, and a copy of both to `recording` when there is one (`yolo run`'s and
    /// `yolo shell`'s terminal). What goes to a terminal passes `terminal::Screen`, which stops
    /// the sequences that reach past the screen (the clipboard, the title, queries), unless
    /// `host_sequences` lets them through (`[terminal] host_sequences` in the user's config).
    Attached {
        recording: Option<Recording>,
        host_sequences: bool,
        /// What yolo draws on the terminal's last row over the command (the held questions'
        /// prompt of `yolo run`, `ask_prompt`), with a TTY only.
        overlay: Option<std::sync::Arc<dyn Overlay>>,
    },
    /// Our stderr, each line prefixed with `[name] ` (lifecycle hooks).
    Prefixed(String),
    /// As `Prefixed`, but the lines of stderr holding `mark` (a secret only the hook's root
    /// broker knows, `bring_up::hooks`) are records, not output: what follows the mark is
    /// returned in `ExecResult::records` and not shown.
    Recorded { name: String, mark: String },
    /// Kept in memory and returned (stdout and stderr together).
    Capture,
}

/// Something yolo draws on an attached terminal's last row while a command runs there (the
/// held questions' prompt of `yolo run`, `ask_prompt`): it may take keys from the input, and a
/// row from the command's terminal, which is then sized one row shorter.
pub(crate) trait Overlay: Send + Sync + std::fmt::Debug {
    /// The bytes of `input` that go on to the command (the rest were the overlay's keys).
    fn input(&self, input: &[u8]) -> Vec<u8>;
    /// Whether the command's next output may be written now; `true` marks it being written
    /// until [`output`](Self::output). `false` while the overlay holds the command's output
    /// back (it asks the user something the command must not draw over): the command's output
    /// waits, and so does the command once its terminal's buffer is full.
    fn may_write(&self) -> bool;
    /// The command wrote to the terminal (the overlay draws itself again once it is quiet).
    fn output(&self);
    /// Rows of the terminal the command does not get now.
    fn rows_taken(&self) -> u16;
    /// Woken when [`rows_taken`](Self::rows_taken) changes (the command's terminal is sized
    /// again).
    fn changed(&self) -> &tokio::sync::Notify;
}

/// The command's next output, once the overlay lets it be written ([`Overlay::may_write`],
/// asked for what is written only): held back while the overlay asks the user something (an
/// interrupt still ends the wait).
async fn next_writable<S, E>(
    stream: &mut S,
    overlay: Option<&dyn Overlay>,
) -> Option<std::result::Result<LogOutput, E>>
where
    S: futures_util::Stream<Item = std::result::Result<LogOutput, E>> + Unpin,
{
    let item = stream.next().await?;
    let written = matches!(
        item,
        Ok(LogOutput::StdOut { .. } | LogOutput::Console { .. } | LogOutput::StdErr { .. })
    );
    if let Some(overlay) = overlay.filter(|_| written) {
        while !overlay.may_write() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    Some(item)
}

/// Where a copy of a command's output goes: any writer (the caller's asciicast recorder).
#[derive(Clone)]
pub(crate) struct Recording(std::sync::Arc<std::sync::Mutex<Box<dyn Write + Send>>>);

impl Recording {
    pub(crate) fn new(to: impl Write + Send + 'static) -> Recording {
        Recording(std::sync::Arc::new(std::sync::Mutex::new(Box::new(to))))
    }

    fn copy(&self, bytes: &[u8]) {
        let mut to = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // A recording that cannot be written must not break the command it records.
        let _ = to.write_all(bytes).and_then(|()| to.flush());
    }
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recording")
    }
}

pub(crate) struct ExecResult {
    pub(crate) exit_code: i64,
    pub(crate) captured: Vec<u8>,
    /// With `Output::Recorded`: the records, in order.
    pub(crate) records: Vec<String>,
}

impl Engine {
    pub(crate) async fn exec(
        &self,
        container: &str,
        req: &ExecRequest,
        output: Output,
    ) -> Result<ExecResult> {
        // Docker cannot kill an exec: this mark in the environment, which the command's
        // children inherit, is how `stop_marked` finds them when yolo is interrupted.
        let mark = format!("{EXEC_MARK}={}", uuid::Uuid::new_v4().simple());
        let mut env = req.env.clone();
        env.push(mark.clone());
        let config = CreateExecOptions {
            cmd: Some(req.command(&req.argv)),
            user: req.user.clone(),
            working_dir: req.cwd.clone(),
            env: Some(env),
            tty: Some(req.tty),
            attach_stdin: Some(req.stdin),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let created = self
            .docker
            .create_exec(container, config)
            .await
            .map_err(|e| {
                Error::docker(
                    format!("running {} in the container", short(&req.argv)),
                    message(&e),
                )
            })?;
        let started = self
            .docker
            .start_exec(
                &created.id,
                Some(StartExecOptions {
                    tty: req.tty,
                    ..Default::default()
                }),
            )
            .await
            .map_err(|e| Error::docker("starting the command", message(&e)))?;
        let StartExecResults::Attached {
            output: mut stream,
            mut input,
        } = started
        else {
            return Err(Error::docker(
                "attaching to the command",
                "the engine started it detached",
            ));
        };

        let _raw = if req.tty { RawMode::enable() } else { None };
        let overlay = match &output {
            Output::Attached {
                overlay: Some(overlay),
                ..
            } if req.tty => Some(overlay.clone()),
            _ => None,
        };
        // Aborted when this returns: they outlive nothing of the command.
        let mut tasks = Tasks::default();
        if req.tty {
            self.resize(&created.id, overlay.as_deref()).await;
            // SIGWINCH says the terminal changed size; Windows has no such signal (its
            // console is sized once, at the start). The overlay taking or giving back its row
            // sizes the command's terminal again too.
            #[cfg(unix)]
            {
                let engine = self.clone();
                let id = created.id.clone();
                let overlay = overlay.clone();
                tasks.0.push(tokio::spawn(async move {
                    use tokio::signal::unix::{signal, SignalKind};
                    let Ok(mut winch) = signal(SignalKind::window_change()) else {
                        return;
                    };
                    loop {
                        match &overlay {
                            Some(o) => tokio::select! {
                                got = winch.recv() => if got.is_none() { return },
                                () = o.changed().notified() => {}
                            },
                            None => {
                                if winch.recv().await.is_none() {
                                    return;
                                }
                            }
                        }
                        engine.resize(&id, overlay.as_deref()).await;
                    }
                }));
            }
        }
        if req.stdin {
            let overlay = overlay.clone();
            tokio::spawn(async move {
                let mut stdin = tokio::io::stdin();
                let mut buf = vec![0u8; 8192];
                loop {
                    match stdin.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let passed = match &overlay {
                                Some(o) => o.input(&buf[..n]),
                                None => buf[..n].to_vec(),
                            };
                            if passed.is_empty() {
                                continue;
                            }
                            if input.write_all(&passed).await.is_err() {
                                return;
                            }
                            let _ = input.flush().await;
                        }
                    }
                }
                // Half-close: the command sees end of input.
                let _ = input.shutdown().await;
            });
        } else {
            drop(input);
        }

        let mut sink = Sink::new(output);
        loop {
            let item = tokio::select! {
                item = next_writable(&mut stream, overlay.as_deref()) => item,
                signal = interrupt::received() => {
                    sink.flush();
                    let stopped = self.stop_marked(container, req, &mark).await;
                    return Err(Error::Interrupted {
                        signal,
                        stopped: stopped.then(|| short(&req.argv)),
                    });
                }
            };
            let Some(item) = item else { break };
            match item {
                Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => {
                    sink.out(&message)
                }
                Ok(LogOutput::StdErr { message }) => sink.err(&message),
                Ok(LogOutput::StdIn { .. }) => {}
                Err(e) => return Err(Error::docker("reading the command's output", message(&e))),
            }
        }
        sink.flush();
        let inspect = self
            .docker
            .inspect_exec(&created.id)
            .await
            .map_err(|e| Error::docker("reading the command's exit code", message(&e)))?;
        let exit_code = inspect.exit_code.unwrap_or(-1);
        // 126 with no process: the engine could not start it. A working folder that is not
        // there is the usual cause (a `workspaceFolder` that no mount makes), and the engine's
        // own words for it ("chdir to cwd ... set in config.json") do not say what to fix.
        if exit_code == 126 && inspect.pid.unwrap_or(0) == 0 {
            if let Some(cwd) = req.cwd.as_deref() {
                if !self.folder_exists(container, cwd).await {
                    return Err(Error::step(Step::WorkingFolder, format!(
                        "cannot run {} in the container: its working folder {} does not exist there; it is the config's \"workspaceFolder\": check that a mount makes it (\"workspaceMount\", or in a Compose config the dev service's volumes)",
                        short(&req.argv),
                        crate::visible::escape_controls(cwd),
                    )));
                }
            }
        }
        Ok(ExecResult {
            exit_code,
            captured: sink.captured,
            records: sink.records,
        })
    }

    /// Whether the folder `path` exists in the container, asked of the engine
    /// (`HEAD /containers/{id}/archive`, which runs nothing in the container: a check that ran a
    /// program there would run the agent's, and without the exec audit's shim). Anything but a
    /// clear "not there" counts as yes: this only words an error better.
    async fn folder_exists(&self, container: &str, path: &str) -> bool {
        let options = bollard::query_parameters::ContainerArchiveInfoOptions {
            path: path.to_string(),
        };
        match self
            .docker
            .get_container_archive_info(container, Some(options))
            .await
        {
            Ok(_) => true,
            Err(e) => !super::is_not_found(&e),
        }
    }

    /// Stop every process of the container that carries `mark` in its environment: SIGTERM,
    /// then SIGKILL to those left after a grace. Run as the command's user (reading another
    /// user's environment needs CAP_SYS_PTRACE, which the agent's root lacks). Best effort:
    /// yolo is on its way out.
    /// Whether it could confirm nothing of the command is left (the script needs `tr` and
    /// `grep` in the image).
    async fn stop_marked(&self, container: &str, req: &ExecRequest, mark: &str) -> bool {
        let config = CreateExecOptions {
            // Recorded like any exec, but not confined: the command's processes are in a
            // Landlock domain of their own, whose environment another domain cannot read.
            cmd: Some(req.command_with(
                &["--unconfined"],
                &[
                    "/bin/sh".to_string(),
                    "-c".into(),
                    STOP_SCRIPT.into(),
                    "yolo-stop".into(),
                    mark.to_string(),
                ],
            )),
            user: req.user.clone(),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let stop = async {
            let created = self.docker.create_exec(container, config).await.ok()?;
            if let Ok(StartExecResults::Attached { mut output, .. }) =
                self.docker.start_exec(&created.id, None).await
            {
                while output.next().await.is_some() {}
            }
            let inspect = self.docker.inspect_exec(&created.id).await.ok()?;
            Some(inspect.exit_code == Some(0))
        };
        matches!(
            tokio::time::timeout(STOP_TIMEOUT, stop).await,
            Ok(Some(true))
        )
    }

    /// Size the command's terminal as ours, less the rows the overlay takes.
    async fn resize(&self, exec_id: &str, overlay: Option<&dyn Overlay>) {
        if let Ok((width, height)) = crossterm::terminal::size() {
            let taken = overlay.map_or(0, |o| o.rows_taken());
            let height = height.saturating_sub(taken).max(1);
            let _ = self
                .docker
                .resize_exec(exec_id, ResizeExecOptions { height, width })
                .await;
        }
    }
}

/// Tasks aborted when dropped.
#[derive(Default)]
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

struct RawMode;

impl RawMode {
    fn enable() -> Option<RawMode> {
        crossterm::terminal::enable_raw_mode().ok().map(|_| RawMode)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // What the command left of the terminal's state (modes, colours, the alternate
        // screen, mouse reports) is undone before the terminal is the host's again.
        let mut out = std::io::stdout().lock();
        let _ = out
            .write_all(crate::terminal::RESET.as_bytes())
            .and_then(|()| out.flush());
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// The most a command's output kept in memory (`Output::Capture`: the probe, hooks' answers)
/// may hold: the agent decides what its shell's startup files print, and yolo must not grow
/// without end on the host. What comes after is dropped.
const MAX_CAPTURE: usize = 16 << 20;

/// A hook's output line longer than this is shown in pieces.
const MAX_PENDING_LINE: usize = 64 << 10;

/// The most a command may write through this process's own stdout and stderr; unlimited unless
/// `cap_own_output` set it (the keeper of a detached run, whose stdout is the run's log file).
static OWN_OUTPUT_CAP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);
static OWN_OUTPUT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Cap what commands write through this process's stdout and stderr at `bytes` (a detached
/// run's log: the agent decides how much it prints). Past it, one line says so and the rest is
/// dropped (the command goes on).
pub(crate) fn cap_own_output(bytes: u64) {
    OWN_OUTPUT_CAP.store(bytes, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `len` more bytes fit under the cap; the first time they do not, the note is written.
fn own_output_fits(len: usize) -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    let cap = OWN_OUTPUT_CAP.load(Relaxed);
    let before = OWN_OUTPUT.fetch_add(len as u64, Relaxed);
    if before.saturating_add(len as u64) <= cap {
        return true;
    }
    if before <= cap {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "\r\n[yolo: this log stopped here, at its cap of {} MiB; the command went on]",
            cap >> 20
        );
    }
    false
}

struct Sink {
    output: Output,
    captured: Vec<u8>,
    records: Vec<String>,
    pending_out: Vec<u8>,
    pending_err: Vec<u8>,
    /// The filters of our stdout and stderr, for those that are a terminal.
    screens: [Option<crate::terminal::Screen>; 2],
}

impl Sink {
    fn new(output: Output) -> Sink {
        use std::io::IsTerminal;
        let filtered = matches!(
            output,
            Output::Attached {
                host_sequences: false,
                ..
            }
        );
        let screen = |terminal: bool| {
            (filtered && terminal)
                .then(|| crate::terminal::Screen::new(crate::terminal::Stop::Drop))
        };
        Sink {
            output,
            captured: Vec::new(),
            records: Vec::new(),
            pending_out: Vec::new(),
            pending_err: Vec::new(),
            screens: [
                screen(std::io::stdout().is_terminal()),
                screen(std::io::stderr().is_terminal()),
            ],
        }
    }

    fn out(&mut self, bytes: &[u8]) {
        self.write(bytes, false);
    }

    fn err(&mut self, bytes: &[u8]) {
        self.write(bytes, true);
    }

    fn write(&mut self, bytes: &[u8], to_stderr: bool) {
        if let Output::Attached {
            recording: Some(recording),
            ..
        } = &self.output
        {
            // The recording keeps what the command wrote; `yolo replay` filters it.
            recording.copy(bytes);
        }
        match &self.output {
            Output::Attached { .. } => {
                if own_output_fits(bytes.len()) {
                    match &mut self.screens[usize::from(to_stderr)] {
                        Some(screen) => {
                            let mut shown = Vec::with_capacity(bytes.len());
                            screen.push(bytes, &mut shown);
                            write_own(&shown, to_stderr);
                        }
                        None => write_own(bytes, to_stderr),
                    }
                }
                // Said even when nothing was written: `may_write` marked it begun.
                if let Output::Attached {
                    overlay: Some(overlay),
                    ..
                } = &self.output
                {
                    overlay.output();
                }
            }
            Output::Prefixed(_) | Output::Recorded { .. } => {
                let pending = if to_stderr {
                    &mut self.pending_err
                } else {
                    &mut self.pending_out
                };
                pending.extend_from_slice(bytes);
                self.emit_lines(false);
            }
            Output::Capture => {
                let room = MAX_CAPTURE.saturating_sub(self.captured.len());
                self.captured
                    .extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
        }
    }

    fn emit_lines(&mut self, all: bool) {
        let (name, mark) = match &self.output {
            Output::Prefixed(name) => (name, None),
            Output::Recorded { name, mark } => (name, Some(mark.as_bytes())),
            _ => return,
        };
        let mut err = std::io::stderr().lock();
        for (is_err, pending) in [
            (false, &mut self.pending_out),
            (true, &mut self.pending_err),
        ] {
            while let Some(pos) = pending.iter().position(|b| *b == b'\n') {
                let mut line: Vec<u8> = pending.drain(..=pos).collect();
                // A record may follow what the hook wrote without a newline on the same
                // stream: that part is output, the rest the record.
                if let Some(at) = mark
                    .filter(|_| is_err)
                    .and_then(|m| memchr::memmem::find(&line, m).map(|at| (at, m.len())))
                {
                    let record = String::from_utf8_lossy(&line[at.0 + at.1..]);
                    self.records.push(record.trim().to_string());
                    line.truncate(at.0);
                    if line.is_empty() {
                        continue;
                    }
                    line.push(b'\n');
                }
                let _ = write!(err, "{}", crate::visible::prefixed_line(name, &line));
            }
            // Output without a newline is shown in pieces rather than held without end (the
            // agent may have rewritten the hook).
            if pending.len() >= MAX_PENDING_LINE {
                let _ = writeln!(err, "{}", crate::visible::prefixed_line(name, pending));
                pending.clear();
            }
            if all && !pending.is_empty() {
                let _ = writeln!(err, "{}", crate::visible::prefixed_line(name, pending));
                pending.clear();
            }
        }
        let _ = err.flush();
    }

    fn flush(&mut self) {
        self.emit_lines(true);
        for (i, screen) in self.screens.iter_mut().enumerate() {
            if let Some(screen) = screen {
                let mut rest = Vec::new();
                screen.end(&mut rest);
                write_own(&rest, i == 1);
            }
        }
    }
}

/// `bytes` to our stdout or stderr, as they are.
fn write_own(bytes: &[u8], to_stderr: bool) {
    if bytes.is_empty() {
        return;
    }
    // A terminal that went away must not stop the command.
    let _ = if to_stderr {
        let mut err = std::io::stderr().lock();
        err.write_all(bytes).and_then(|()| err.flush())
    } else {
        let mut out = std::io::stdout().lock();
        out.write_all(bytes).and_then(|()| out.flush())
    };
}

/// A command line short enough for an error message.
fn short(argv: &[String]) -> String {
    let text = argv.join(" ");
    match text.char_indices().nth(60) {
        Some((i, _)) => format!("`{}…`", text[..i].replace('\n', " ")),
        None => format!("`{text}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hook that prints without a newline is shown in pieces, not held in memory.
    #[test]
    fn a_hooks_endless_line_is_not_held() {
        let mut sink = Sink::new(Output::Prefixed("postCreateCommand".into()));
        let chunk = vec![b'y'; 1 << 16];
        for _ in 0..8 {
            sink.out(&chunk);
        }
        assert!(sink.pending_out.len() < MAX_PENDING_LINE);
    }

    /// A hook's root broker's records are taken out of its stderr, also after output without
    /// a newline; the same text on stdout, or without the mark, is output.
    #[test]
    fn records_are_taken_out_of_a_hooks_stderr() {
        let mut sink = Sink::new(Output::Recorded {
            name: "postCreateCommand".into(),
            mark: "M4RK ".into(),
        });
        sink.err(b"partial M4RK {\"a\":1}\nM4RK {\"b\":2}\nplain\n");
        sink.out(b"M4RK {\"forged\":1}\n");
        sink.flush();
        assert_eq!(sink.records, [r#"{"a":1}"#, r#"{"b":2}"#]);
    }

    /// Output kept in memory (the probe of a shell whose startup file prints without end)
    /// stops growing at its cap.
    #[test]
    fn captured_output_stops_at_its_cap() {
        let mut sink = Sink::new(Output::Capture);
        let chunk = vec![b'y'; 1 << 20];
        for _ in 0..20 {
            sink.out(&chunk);
        }
        assert_eq!(sink.captured.len(), MAX_CAPTURE);
    }
}
