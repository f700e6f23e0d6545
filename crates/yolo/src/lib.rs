//! yolo: run coding agents in YOLO mode inside a hardened, firewalled dev container.

pub mod agents;
pub mod audit;
pub mod cli;
pub mod commands;
pub mod devcontainer;
pub mod engine;
pub mod error;
pub mod firewall;
pub mod policy;
pub mod project;
pub mod run_spec;
pub mod state;
pub mod user_config;

pub use error::{Error, Result};

/// Parse the command line, run, print an error for humans, return the exit code.
pub fn run() -> i32 {
    use clap::Parser;
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // clap's own exit code for a usage error is 2; yolo's is EX_USAGE. Help and
            // --version are printed to stdout and succeed.
            return if e.use_stderr() { 64 } else { 0 };
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("yolo: cannot start: {e}");
            return 1;
        }
    };
    let result = runtime.block_on(commands::execute(cli));
    // Don't wait for a blocked stdin reader: the command is over.
    runtime.shutdown_background();
    report(result)
}

fn report(result: Result<i32>) -> i32 {
    match result {
        Ok(code) => code,
        Err(Error::ExitCode(code)) => code,
        Err(e) => {
            eprintln!("{} {e}", console::style("yolo:").red().bold());
            e.code()
        }
    }
}
