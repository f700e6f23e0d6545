//! Docker, through bollard. Only this module talks to the Docker Engine.

pub mod containers;
pub mod exec;
pub mod guard;
pub mod guard_image;
pub mod images;
pub mod labels;

use crate::error::{Error, Result};
use bollard::Docker;

pub use bollard::Docker as Client;

/// A connected Docker client whose API version was negotiated with the engine.
#[derive(Clone)]
pub struct Engine {
    pub docker: Docker,
}

impl Engine {
    /// Connect to the local engine (`DOCKER_HOST` or the default socket) and agree on an API
    /// version, so an older engine (API 1.41, Docker 20.10) understands our requests.
    pub async fn connect() -> Result<Engine> {
        let unreachable = |e: bollard::errors::Error| {
            Error::Docker {
            action: "connecting to the Docker Engine".into(),
            message: message(&e),
            hint: Some(
                "is Docker running? Start it (e.g. `sudo systemctl start docker`), check DOCKER_HOST, then run `yolo doctor`"
                    .into(),
            ),
        }
        };
        let docker = Docker::connect_with_local_defaults().map_err(unreachable)?;
        let docker = docker.negotiate_version().await.map_err(unreachable)?;
        Ok(Engine { docker })
    }
}

/// True when the error is Docker's 404 (no such container / image / exec).
pub fn is_not_found(err: &bollard::errors::Error) -> bool {
    matches!(
        err,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// The message of a Docker error without Rust Debug noise.
pub fn message(err: &bollard::errors::Error) -> String {
    match err {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
