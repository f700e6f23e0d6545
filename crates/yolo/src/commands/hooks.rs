//! Running lifecycle hooks and other commands in the container (or on the host), streaming their
//! output with the hook's name and writing each one to the audit log.

use crate::audit::{EventKind, Writer};
use crate::devcontainer::model::LifecycleCommand;
use crate::engine::exec::{ExecRequest, ExecResult, Output};
use crate::engine::Engine;
use crate::error::{Error, Result};
use std::time::Instant;

/// Where and as whom commands run.
pub struct Runner<'a> {
    pub engine: &'a Engine,
    pub container: String,
    pub user: Option<String>,
    pub cwd: String,
    pub env: Vec<String>,
    pub writer: Option<&'a Writer>,
}

impl Runner<'_> {
    /// Run a lifecycle hook in the container; the object form's commands run in parallel.
    /// A failing command stops with its name and exit code.
    pub async fn hook(&self, hook: &str, command: &LifecycleCommand) -> Result<()> {
        let commands = command.commands(hook);
        let runs = commands
            .iter()
            .map(|(name, argv)| self.run_hook_command(name, argv));
        let results = futures_util::future::join_all(runs).await;
        for result in results {
            result?;
        }
        Ok(())
    }

    async fn run_hook_command(&self, name: &str, argv: &[String]) -> Result<()> {
        let request = self.request(argv.to_vec(), false, false);
        let result = self
            .run("hook", name, &request, Output::Prefixed(name.to_string()))
            .await?;
        if result.exit_code != 0 {
            return Err(Error::Hook {
                name: name.to_string(),
                code: result.exit_code,
            });
        }
        Ok(())
    }

    pub fn request(&self, argv: Vec<String>, tty: bool, stdin: bool) -> ExecRequest {
        ExecRequest {
            argv,
            user: self.user.clone(),
            cwd: Some(self.cwd.clone()),
            env: self.env.clone(),
            tty,
            stdin,
        }
    }

    /// Run and audit one command.
    pub async fn run(
        &self,
        source: &str,
        name: &str,
        request: &ExecRequest,
        output: Output,
    ) -> Result<ExecResult> {
        let started = chrono::Utc::now();
        let clock = Instant::now();
        let result = self.engine.exec(&self.container, request, output).await;
        let exit_code = result.as_ref().ok().map(|r| r.exit_code);
        self.audit(source, name, request, started, exit_code, clock)?;
        result
    }

    fn audit(
        &self,
        source: &str,
        name: &str,
        request: &ExecRequest,
        started: chrono::DateTime<chrono::Utc>,
        exit_code: Option<i64>,
        clock: Instant,
    ) -> Result<()> {
        let Some(writer) = self.writer else {
            return Ok(());
        };
        writer.write(EventKind::Command {
            source: source.into(),
            name: name.into(),
            argv: request.argv.clone(),
            user: request
                .user
                .clone()
                .unwrap_or_else(|| "(container default)".into()),
            cwd: request.cwd.clone().unwrap_or_default(),
            started,
            exit_code,
            duration_ms: clock.elapsed().as_millis() as u64,
        })
    }
}

/// Run `initializeCommand` on the host (only reached when the user trusts host commands).
pub async fn run_on_host(
    command: &LifecycleCommand,
    cwd: &std::path::Path,
    writer: Option<&Writer>,
) -> Result<()> {
    for (name, argv) in command.commands("initializeCommand") {
        let Some((program, args)) = argv.split_first() else {
            continue;
        };
        let started = chrono::Utc::now();
        let clock = Instant::now();
        let status = tokio::process::Command::new(program)
            .args(args)
            .current_dir(cwd)
            .status()
            .await
            .map_err(|e| {
                Error::CommandFailed(format!(
                    "{name}: could not run {program:?} on the host: {e}"
                ))
            })?;
        let code = status.code().map(i64::from).unwrap_or(-1);
        if let Some(writer) = writer {
            writer.write(EventKind::Command {
                source: "host".into(),
                name: name.clone(),
                argv: argv.clone(),
                user: std::env::var("USER").unwrap_or_default(),
                cwd: cwd.display().to_string(),
                started,
                exit_code: Some(code),
                duration_ms: clock.elapsed().as_millis() as u64,
            })?;
        }
        if code != 0 {
            return Err(Error::Hook { name, code });
        }
    }
    Ok(())
}
