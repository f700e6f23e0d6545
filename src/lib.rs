//! yolo: run coding agents in YOLO mode inside a hardened, firewalled dev container.

pub mod agents;
pub mod audit;
pub mod cli;
pub mod devcontainer;
pub mod error;
pub mod firewall;
pub mod policy;
pub mod run_spec;
pub mod user_config;

pub use error::{Error, Result};

/// Parse the command line, run, print an error for humans, return the exit code.
pub fn run() -> i32 {
    0
}
