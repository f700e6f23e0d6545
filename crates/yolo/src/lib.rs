//! yolo: run coding agents in YOLO mode inside a hardened, firewalled dev container.

pub(crate) mod agents;
pub(crate) mod audit;
pub(crate) mod bring_up;
pub(crate) mod ca;
pub(crate) mod checkpoint;
pub(crate) mod cli;
pub(crate) mod commands;
pub(crate) mod credentials;
pub(crate) mod devcontainer;
pub(crate) mod digest;
pub(crate) mod dockerfile;
pub(crate) mod dockerfile_lower;
pub(crate) mod engine;
pub(crate) mod env_file;
pub(crate) mod error;
pub(crate) mod firewall;
pub(crate) mod fs_at;
pub(crate) mod http_config;
pub(crate) mod http_scope;
pub(crate) mod http_session;
pub(crate) mod interrupt;
pub(crate) mod k8s;
pub(crate) mod lock;
pub(crate) mod output;
pub(crate) mod paths;
pub(crate) mod policy;
pub(crate) mod policy_facts;
pub(crate) mod project;
pub(crate) mod remote;
pub(crate) mod remote_copy;
pub(crate) mod run_spec;
pub(crate) mod session;
pub(crate) mod session_ca;
pub(crate) mod settings;
pub(crate) mod signal;
pub(crate) mod store;
pub(crate) mod templates;
pub(crate) mod terminal;
pub(crate) mod user_config;
pub(crate) mod values;
pub(crate) mod visible;
pub(crate) mod watch;
pub(crate) mod watched;

pub(crate) use error::{Error, Result};

/// Parse the command line, run, print an error for humans, return the exit code.
pub fn run() -> i32 {
    use clap::Parser;
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage(e),
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
    let result = runtime.block_on(async {
        interrupt::listen();
        let command = commands::execute(cli);
        tokio::pin!(command);
        let signal = tokio::select! {
            result = &mut command => return result,
            signal = interrupt::received() => signal,
        };
        interrupt::finish(signal, command).await
    });
    // Don't wait for a blocked stdin reader: the command is over.
    runtime.shutdown_background();
    report(result)
}

/// clap's own message; `--help` and `--version` exit 0, every usage error 64 (EX_USAGE), as
/// docs/configuration.md documents (clap alone would exit 2).
fn usage(e: clap::Error) -> i32 {
    let _ = e.print();
    match e.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => 0,
        _ => Error::USAGE,
    }
}

fn report(result: Result<i32>) -> i32 {
    match result {
        Ok(code) => code,
        Err(e) => {
            // Errors quote the repository (names, values, paths, command output): its control
            // characters are shown, never sent to the terminal. The values are escaped where
            // the message quotes them (`visible::escape_controls`, newlines too); the line
            // ends kept here are the message's own (a list of refusals, a hint).
            let text = visible::escape_lines(&e.to_string());
            eprintln!("{} {text}", console::style("yolo:").red().bold());
            e.code()
        }
    }
}
