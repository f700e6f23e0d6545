//! `yolo completions <shell>`: the completion script for a shell, generated from the clap
//! definitions so it never lists a subcommand or flag the CLI does not have.

use crate::cli::Cli;
use crate::error::{Error, Result};
use clap::CommandFactory;
use clap_complete::Shell;
use std::io::Write;

pub(crate) fn execute(shell: Shell) -> Result<i32> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "yolo", &mut script);
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&script)
        .and_then(|()| stdout.flush())
        .map_err(|e| Error::io("<stdout>", e))?;
    Ok(0)
}
