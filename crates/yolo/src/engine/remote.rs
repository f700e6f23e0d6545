//! A remote engine: one that is not on this machine, so no host folder can be bind-mounted into
//! its containers. Which engine is remote is decided here, from the same choice
//! `Engine::connect` makes (`endpoint`): a `tcp://`, `http(s)://` or `ssh://` host is remote, a
//! `unix://` socket is local. `YOLO_REMOTE=1` forces the remote path on a local engine (the tests
//! do, so the code that runs against a real remote engine is the code under test);
//! `YOLO_REMOTE=0` forces the local path (an engine reached over TCP that shares this machine's
//! disk).
//!
//! What the remote path needs from Docker is also here: whether a volume exists, a tar copied
//! into or out of a container's folder (`PUT`/`GET /containers/{id}/archive`, which work on a
//! created or stopped container too, and see its volumes), and where a volume is mounted.
//! `remote` decides what to copy and what to do with it.

use super::endpoint::{Endpoint, Environment};
use super::{is_not_found, message, Engine};
use crate::error::{Cause, Dependency, Error, Failure, Result};
use crate::run_spec::{Protected, RunSpec};
use bollard::query_parameters::{
    DownloadFromContainerOptions, InspectContainerOptions, UploadToContainerOptions,
};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Where `fill_volume`'s helper container mounts the volume.
const FILL_POINT: &str = "/yolo-fill";

/// Go's `os.ModeDir` and `os.ModeSymlink`, as the archive endpoint's `mode` carries them.
const GO_MODE_DIR: u32 = 1 << 31;
const GO_MODE_SYMLINK: u32 = 1 << 27;

/// The refusal of a link at `rel` in the copy (pointing at `target`).
fn planted_link(spec: &RunSpec, rel: &str, target: &str) -> Error {
    Error::Refused {
        file: spec.config_file.clone(),
        property: "the workspace".into(),
        value: format!(
            "{rel} in the copy (volume {}) as a symbolic link to {target}",
            spec.workspace_mount.source
        ),
        reason: "yolo binds this path read-only from the volume's folder on the engine's machine, and a link there would bind wherever it points on that machine".into(),
        grant: format!(
            "nothing: remove the copy (`yolo down{} --remove --volumes`) so the next `up` copies the repository afresh, or take {rel} out of [workspace] read_only in your yolo config",
            crate::project::copy_flag(spec.copy.as_deref())
        ),
    }
}

/// `host` below `workspace` as a relative path with `/`, or None when it is not below it (or
/// not valid UTF-8, which the archive endpoint could not name).
fn copy_relative(workspace: &Path, host: &Path) -> Option<String> {
    let rel = host.strip_prefix(workspace).ok()?;
    let parts: Vec<&str> = rel
        .components()
        .map(|c| match c {
            std::path::Component::Normal(part) => part.to_str(),
            _ => None,
        })
        .collect::<Option<_>>()?;
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The variable that forces the remote path (`1`) or the local one (`0`).
pub(crate) const FORCE_VAR: &str = "YOLO_REMOTE";

/// Why the engine is remote (for messages), or `None` when it is on this machine.
pub(crate) fn remote_reason() -> Result<Option<String>> {
    match std::env::var(FORCE_VAR).ok().as_deref() {
        Some("1") => return Ok(Some(format!("{FORCE_VAR}=1"))),
        Some("0") => return Ok(None),
        _ => {}
    }
    let endpoint = Endpoint::choose(&Environment::from_process())?;
    Ok(is_remote_host(&endpoint.host).then(|| {
        format!(
            "the engine is {} ({})",
            crate::visible::escape_controls(&endpoint.host),
            endpoint.source
        )
    }))
}

/// Whether the engine is on another machine (an unreadable setting: no, the error comes where
/// the engine is chosen), whose guards log to a volume there and read a config copied in.
pub(crate) fn engine_is_remote() -> bool {
    remote_reason().is_ok_and(|r| r.is_some())
}

/// Whether an engine address is on another machine: anything but a local socket or pipe.
fn is_remote_host(host: &str) -> bool {
    let scheme = host.split_once("://").map_or("", |(scheme, _)| scheme);
    !matches!(scheme, "unix" | "npipe")
}

impl Engine {
    /// The exec audit's shim in a volume of the project (`yolo-shim-<id>`), for a remote
    /// engine, where its host folder (`guard_image::shim_dir`) cannot be bound. The agent
    /// mounts the volume read-only, as it would the folder.
    pub(crate) async fn shim_volume(
        &self,
        host_dir: &std::path::Path,
        devcontainer_id: &str,
        image: &str,
    ) -> Result<String> {
        let name = format!("yolo-shim-{devcontainer_id}");
        let file = yolo_protocol::SHIM_PATH
            .rsplit_once('/')
            .map_or(yolo_protocol::SHIM_PATH, |(_, name)| name);
        let shim =
            std::fs::read(host_dir.join(file)).map_err(|e| Error::io(host_dir.join(file), e))?;
        let pack =
            |e: std::io::Error| Error::failed(Failure::Archive, Cause::of("packing the shim", e));
        let mut tar = tar::Builder::new(Vec::new());
        super::guard_image::append(&mut tar, file, 0o555, &shim).map_err(pack)?;
        let tar = tar.into_inner().map_err(pack)?;
        self.create_volume(&name, devcontainer_id).await?;
        self.fill_volume(&name, devcontainer_id, image, tar).await?;
        Ok(name)
    }

    /// Unpack `tar` at the root of volume `name`, through a helper container of `image` that
    /// never starts (made with the volume, filled, removed): nothing runs on the engine.
    pub(crate) async fn fill_volume(
        &self,
        name: &str,
        devcontainer_id: &str,
        image: &str,
        tar: Vec<u8>,
    ) -> Result<()> {
        let volume = name.to_string();
        self.fill_volume_with(name, devcontainer_id, image, move |out| {
            out.write_all(&tar).map_err(|e| {
                Error::failed(
                    Failure::Transfer,
                    Cause::of(format!("copying into the volume {volume}"), e),
                )
            })
        })
        .await
    }

    /// `fill_volume`, the archive written by `write` as it uploads (`upload_with`).
    pub(crate) async fn fill_volume_with<T: Send + 'static>(
        &self,
        name: &str,
        devcontainer_id: &str,
        image: &str,
        write: impl FnOnce(&mut dyn std::io::Write) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let id = self.volume_helper(name, devcontainer_id, image).await?;
        let action = format!("copying the repository into {FILL_POINT}");
        let copied = self.upload_with(&id, FILL_POINT, action, write).await;
        self.remove_container(&id, true).await?;
        copied
    }

    /// A container of `image`, never started, that mounts the volume `name` (the volume's
    /// labels for `devcontainer_id`, so `down --remove` finds one left behind), and where: to
    /// read the volume through the archive endpoint when no container of the session mounts
    /// it any more. The caller removes it.
    pub(crate) async fn volume_reader(
        &self,
        name: &str,
        devcontainer_id: &str,
        image: &str,
    ) -> Result<(String, String)> {
        let id = self.volume_helper(name, devcontainer_id, image).await?;
        Ok((id, FILL_POINT.to_string()))
    }

    /// The protected paths of the copy in `spec`'s workspace volume, bound from the volume's
    /// own folder on the engine's machine (`<Mountpoint>/<path>`): the same read-only binds a
    /// local workspace gets (`policy::protect`), where a volume cannot mount a sub-folder.
    ///
    /// The engine resolves a bind's source on its own machine, following links: a link the
    /// agent left in the kept volume would bind whatever it names there. So every component of
    /// every path is looked at first in the volume (`HEAD /containers/{id}/archive`, which does
    /// not follow the last component), and a link anywhere refuses the start, as a planted link
    /// in a local workspace does. A protected folder the copy lacks (made on this machine after
    /// the volume was filled) is made in the volume, empty; an absent file is left out.
    pub(crate) async fn protect_copy(&self, spec: &RunSpec, image: &str) -> Result<Vec<Protected>> {
        if spec.protected.is_empty() {
            return Ok(Vec::new());
        }
        let volume = &spec.workspace_mount.source;
        let found = self
            .docker
            .inspect_volume(volume)
            .await
            .map_err(|e| Error::docker(format!("inspecting volume {volume}"), message(&e)))?;
        let root = found.mountpoint.trim_end_matches('/').to_string();
        if !root.starts_with('/') {
            return Err(Error::dependency(Dependency::RemoteEngine, format!(
                "the volume {volume} has no folder on the engine's machine (driver {}), so its protected paths ({}) cannot be made read-only; use the local volume driver, or take them out of [workspace] read_only",
                found.driver,
                spec.protected[0].target
            )));
        }
        if self.is_podman() {
            // Podman's archive stat follows the last component and fills `linkTarget` for
            // every path, so the check below could neither see a link nor pass a folder.
            return Err(Error::dependency(Dependency::RemoteEngine, format!(
                "a remote Podman engine cannot show yolo whether the copy's protected paths ({}...) are links, so they cannot be made read-only safely; use a remote Docker Engine, Podman on this machine, or take the paths out of [workspace] read_only (docs/remote.md)",
                spec.protected[0].target
            )));
        }
        let id = self
            .volume_helper(volume, &spec.devcontainer_id, image)
            .await?;
        let checked = self.check_copy(&id, spec, &root).await;
        self.remove_container(&id, true).await?;
        checked
    }

    async fn check_copy(&self, id: &str, spec: &RunSpec, root: &str) -> Result<Vec<Protected>> {
        let mut seen: HashMap<String, Option<bool>> = HashMap::new();
        let mut out = Vec::new();
        'paths: for p in &spec.protected {
            let Some(rel) = copy_relative(&spec.workspace, &p.host) else {
                return Err(Error::dependency(Dependency::WorkspaceCopy, format!(
                    "the protected path {} cannot be named to the engine (not UTF-8, or outside the repository), so it cannot be made read-only in the copy; rename it, or take it out of [workspace] read_only",
                    p.host.display()
                )));
            };
            let mut prefix = String::new();
            for part in rel.split('/') {
                if !prefix.is_empty() {
                    prefix.push('/');
                }
                prefix.push_str(part);
                let is_dir = match seen.get(&prefix) {
                    Some(known) => *known,
                    None => {
                        let known = self.stat_in_copy(id, &prefix, spec).await?;
                        seen.insert(prefix.clone(), known);
                        known
                    }
                };
                match is_dir {
                    // Made here before the copy (or since): the copy gets it too, empty.
                    None if prefix == rel && (p.create_dir || p.host.is_dir()) => {
                        self.make_folder(id, &spec.workspace, &rel).await?;
                        seen.insert(prefix.clone(), Some(true));
                    }
                    // Absent (a file the copy lacks, or a folder on the way): nothing to bind.
                    None => continue 'paths,
                    // A file on the way to a deeper path: nothing below it to bind.
                    Some(false) if prefix != rel => continue 'paths,
                    Some(_) => {}
                }
            }
            out.push(Protected {
                host: PathBuf::from(format!("{root}/{rel}")),
                target: p.target.clone(),
                read_only: p.read_only,
                create_dir: false,
            });
        }
        Ok(out)
    }

    /// Whether `rel` in the copy is a folder (`Some(true)`), another file (`Some(false)`) or
    /// absent (`None`); a link is refused.
    async fn stat_in_copy(&self, id: &str, rel: &str, spec: &RunSpec) -> Result<Option<bool>> {
        let volume = &spec.workspace_mount.source;
        let options = bollard::query_parameters::ContainerArchiveInfoOptions {
            path: format!("{FILL_POINT}/{rel}"),
        };
        let stat = match self
            .docker
            .get_container_archive_info(id, Some(options))
            .await
        {
            Ok(stat) => stat,
            Err(e) if is_not_found(&e) => return Ok(None),
            // A link that leads to itself: Docker cannot resolve it.
            Err(e)
                if message(&e).contains("too many levels of symbolic links")
                    || message(&e).contains("too many links") =>
            {
                return Err(planted_link(spec, rel, "itself (a loop)"));
            }
            Err(e) => {
                return Err(Error::docker(
                    format!("looking at {rel} in the volume {volume}"),
                    message(&e),
                ))
            }
        };
        if stat.file_mode & GO_MODE_SYMLINK != 0 || !stat.link_target.is_empty() {
            let target = crate::visible::escape_controls(&stat.link_target);
            return Err(planted_link(spec, rel, &target));
        }
        Ok(Some(stat.file_mode & GO_MODE_DIR != 0))
    }

    /// An empty folder `rel` in the copy, owned and moded as the one this machine has.
    async fn make_folder(&self, id: &str, workspace: &Path, rel: &str) -> Result<()> {
        let pack = |e: std::io::Error| {
            Error::failed(
                Failure::Archive,
                Cause::of(format!("packing the folder {rel}"), e),
            )
        };
        let mut tar = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(0);
        match std::fs::metadata(workspace.join(rel)) {
            Ok(meta) => header.set_metadata(&meta),
            Err(_) => header.set_mode(0o755),
        }
        // After the metadata, which sets the type of whatever is here.
        header.set_entry_type(tar::EntryType::Directory);
        tar.append_data(&mut header, format!("{rel}/"), std::io::empty())
            .map_err(pack)?;
        let tar = tar.into_inner().map_err(pack)?;
        self.upload(
            id,
            FILL_POINT,
            tar,
            format!("making the folder {rel} in the copy"),
        )
        .await
    }

    /// A container of `image` with volume `name` at [`FILL_POINT`], never started: the archive
    /// endpoints work on it. The caller removes it.
    async fn volume_helper(
        &self,
        name: &str,
        devcontainer_id: &str,
        image: &str,
    ) -> Result<String> {
        let body = bollard::models::ContainerCreateBody {
            image: Some(image.to_string()),
            entrypoint: Some(vec!["/nonexistent".into()]),
            labels: Some(super::labels::volume(devcontainer_id).into_iter().collect()),
            network_disabled: Some(true),
            host_config: Some(bollard::models::HostConfig {
                mounts: Some(vec![bollard::models::Mount {
                    target: Some(FILL_POINT.into()),
                    source: Some(name.to_string()),
                    typ: Some(bollard::models::MountType::VOLUME),
                    // Nothing of the image's own folder at that place goes into the volume.
                    volume_options: Some(bollard::models::MountVolumeOptions {
                        no_copy: Some(true),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let helper = format!("{name}-fill-{}", std::process::id());
        let id = self
            .create(&helper, None, body)
            .await
            .map_err(|e| Error::docker(format!("creating the container that fills {name}"), e))?;
        // The image is the repository's: a `VOLUME` it declares below the mount point would
        // lay another volume over part of the copy, and the helper would see (and fill) that
        // instead of what the agent gets.
        let details = self
            .docker
            .inspect_container(&id, None::<InspectContainerOptions>)
            .await
            .map_err(|e| Error::docker(format!("inspecting container {id}"), message(&e)));
        let others: Vec<String> = match &details {
            Ok(d) => d
                .mounts
                .iter()
                .flatten()
                .filter(|m| m.name.as_deref() != Some(name))
                .filter_map(|m| m.destination.clone())
                .collect(),
            Err(_) => Vec::new(),
        };
        if details.is_err() || !others.is_empty() {
            self.remove_container(&id, true).await?;
            details?;
            return Err(Error::dependency(Dependency::WorkspaceCopy, format!(
                "the image {image} declares volumes ({}) that would hide part of the copy in volume {name} from yolo; remove those VOLUME lines from the image",
                others.join(", ")
            )));
        }
        Ok(id)
    }

    /// Whether the named volume exists.
    pub(crate) async fn volume_exists(&self, name: &str) -> Result<bool> {
        match self.docker.inspect_volume(name).await {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(Error::docker(
                format!("looking for volume {name}"),
                message(&e),
            )),
        }
    }

    /// `PUT /archive`: `tar` unpacked into `folder` of container `id`; `action` names it in
    /// the error.
    pub(super) async fn upload(
        &self,
        id: &str,
        folder: &str,
        tar: Vec<u8>,
        action: String,
    ) -> Result<()> {
        let options = UploadToContainerOptions {
            path: folder.into(),
            ..Default::default()
        };
        self.docker
            .upload_to_container(id, Some(options), bollard::body_full(tar.into()))
            .await
            .map_err(|e| Error::docker(action, message(&e)))
    }

    /// `upload`, the archive written by `write` on a blocking thread as it uploads: a few
    /// chunks in flight, never the whole archive in memory (a repository can hold files of
    /// gigabytes). A failure of `write` (a limit) fails the upload; an upload that stops
    /// (the engine refused it) stops `write` at its next chunk.
    pub(crate) async fn upload_with<T: Send + 'static>(
        &self,
        id: &str,
        folder: &str,
        action: String,
        write: impl FnOnce(&mut dyn std::io::Write) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(8);
        let writer = tokio::task::spawn_blocking(move || {
            let failed = tx.clone();
            let mut out = std::io::BufWriter::with_capacity(256 << 10, Pipe(tx));
            let written = write(&mut out).and_then(|t| {
                std::io::Write::flush(&mut out).map_err(|e| {
                    Error::failed(
                        Failure::Transfer,
                        Cause::of("copying into the container", e),
                    )
                })?;
                Ok(t)
            });
            if written.is_err() {
                // The engine must not take a cut archive for a whole one.
                let _ = failed.blocking_send(Err(std::io::Error::other("the archive stopped")));
            }
            written
        });
        let options = UploadToContainerOptions {
            path: folder.into(),
            ..Default::default()
        };
        let body = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let uploaded = self
            .docker
            .upload_to_container(id, Some(options), bollard::body_try_stream(body))
            .await
            .map_err(|e| Error::docker(action, message(&e)));
        let written = writer.await.map_err(|e| {
            Error::failed(
                Failure::Transfer,
                Cause::of(format!("writing into {folder} stopped"), e),
            )
        })?;
        match (written, uploaded) {
            // The writer's own failure says why (a limit), unless it only saw the upload end.
            // Told by the marker in its cause, never by its words: the writer's error can quote
            // a path of the repository, which may read "the upload ended" too.
            (Err(e), Err(up)) if e.caused_by::<UploadEnded>() => Err(up),
            (Err(e), _) => Err(e),
            (Ok(_), Err(up)) => Err(up),
            (Ok(t), Ok(())) => Ok(t),
        }
    }

    /// `folder` of container `id` as a tar (its entries named `<last component>/...`), handed
    /// to `read` on a blocking thread as it downloads: a few chunks in flight, never the whole
    /// archive in memory (the copy is the agent's, as large as it likes). When `read` returns
    /// early (an error, a limit), the download stops.
    pub(crate) async fn download_with<T: Send + 'static>(
        &self,
        id: &str,
        folder: &str,
        read: impl FnOnce(&mut dyn std::io::Read) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        let reader = tokio::task::spawn_blocking(move || {
            read(&mut Chunks {
                rx,
                current: bytes::Bytes::new(),
            })
        });
        let options = DownloadFromContainerOptions {
            path: folder.into(),
        };
        let mut stream = self.docker.download_from_container(id, Some(options));
        let mut failed = None;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                let said = message(&e);
                failed = Some(said.clone());
                std::io::Error::other(said)
            });
            let last = chunk.is_err();
            // A closed channel: the reader is done with the archive.
            if tx.send(chunk).await.is_err() || last {
                break;
            }
        }
        drop(tx);
        drop(stream);
        let read = reader.await.map_err(|e| {
            Error::failed(
                Failure::Transfer,
                Cause::of(format!("reading {folder} from the container stopped"), e),
            )
        })?;
        match failed {
            Some(said) => Err(Error::docker(
                format!("copying {folder} out of the container"),
                said,
            )),
            None => read,
        }
    }
    /// Where container `id` mounts volume `name`, if it does.
    pub(crate) async fn volume_mount_point(&self, id: &str, name: &str) -> Result<Option<String>> {
        let details = self.inspect_raw(id).await?;
        Ok(details
            .mounts
            .unwrap_or_default()
            .into_iter()
            .find(|m| m.name.as_deref() == Some(name))
            .and_then(|m| m.destination))
    }
}

/// The cause of `Pipe`'s error once the upload it feeds has ended: what `upload_with` tells
/// the writer's failure "the upload went first" by.
#[derive(Debug)]
struct UploadEnded;

impl std::fmt::Display for UploadEnded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the upload ended")
    }
}

impl std::error::Error for UploadEnded {}

/// The blocking writer side of `upload_with`: each write a chunk of the body, waiting while
/// eight are in flight.
struct Pipe(tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>>);

impl std::io::Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .blocking_send(Ok(bytes::Bytes::copy_from_slice(buf)))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, UploadEnded))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The blocking reader side of `download_with`: the chunks the download sends, in order.
struct Chunks {
    rx: tokio::sync::mpsc::Receiver<std::io::Result<bytes::Bytes>>,
    current: bytes::Bytes,
}

impl std::io::Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use bytes::Buf;
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.current = chunk?,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current.advance(n);
        Ok(n)
    }
}

/// An `ssh://` engine reached through the user's own `ssh` (their keys, agent, known hosts
/// and `~/.ssh/config`), forwarding a private local socket to the engine's socket, as the
/// docker CLI does with `docker system dial-stdio`. bollard has no ssh transport; OpenSSH is
/// what the user already trusts with that host. Ended (killed) when the last `Engine` goes.
pub(crate) struct Tunnel {
    child: std::process::Child,
    /// Holds the socket; removed on drop.
    _dir: tempfile::TempDir,
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The engine's socket on the remote machine.
const REMOTE_SOCKET: &str = "/var/run/docker.sock";

impl Tunnel {
    /// `ssh -L` for `host` (`ssh://[user@]name[:port]`) and the `unix://` address of its local
    /// end, once the socket is there.
    pub(crate) fn open(host: &str) -> Result<(Tunnel, String)> {
        let target = host.trim_start_matches("ssh://").trim_end_matches('/');
        let (dest, port) = match target.rsplit_once(':') {
            Some((dest, port)) if port.parse::<u16>().is_ok() => (dest, Some(port)),
            _ => (target, None),
        };
        if dest.is_empty() || dest.starts_with('-') || dest.contains('/') {
            return Err(Error::Usage(format!(
                "DOCKER_HOST={} is not an ssh address yolo can use: write ssh://[USER@]HOST[:PORT]",
                crate::visible::escape_controls(host)
            )));
        }
        let dir = tempfile::Builder::new()
            .prefix("yolo-ssh-")
            .tempdir()
            .map_err(|e| Error::io(std::env::temp_dir(), e))?;
        let socket = dir.path().join("docker.sock");
        let mut cmd = std::process::Command::new("ssh");
        cmd.args([
            "-nNT",
            "-o",
            "ExitOnForwardFailure=yes",
            "-o",
            "BatchMode=yes",
        ])
        .arg("-L")
        .arg(format!("{}:{REMOTE_SOCKET}", socket.display()));
        if let Some(port) = port {
            cmd.args(["-p", port]);
        }
        cmd.arg("--")
            .arg(dest)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let child = cmd.spawn().map_err(|e| {
            Error::dependency(
                Dependency::Ssh,
                if e.kind() == std::io::ErrorKind::NotFound {
                    Cause::from(format!(
                        "DOCKER_HOST={} needs the ssh client, and there is no `ssh` on PATH: install OpenSSH's client (Debian: `apt-get install openssh-client`), or forward the engine's socket yourself and set DOCKER_HOST=unix:///path/to/the/forwarded.sock",
                        crate::visible::escape_controls(host)
                    ))
                } else {
                    Cause::of(format!("ssh could not be started for DOCKER_HOST={host}"), e)
                },
            )
        })?;
        let mut tunnel = Tunnel { child, _dir: dir };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if socket.exists() {
                return Ok((tunnel, format!("unix://{}", socket.display())));
            }
            if let Ok(Some(status)) = tunnel.child.try_wait() {
                let mut said = String::new();
                if let Some(mut err) = tunnel.child.stderr.take() {
                    use std::io::Read;
                    let _ = err.read_to_string(&mut said);
                }
                return Err(Error::Docker {
                    action: format!(
                        "reaching the Docker Engine over ssh ({})",
                        crate::visible::escape_controls(host)
                    ),
                    message: format!(
                        "ssh exited ({status}): {}",
                        crate::visible::escape_controls(said.trim())
                    ),
                    hint: Some(format!(
                        "check that `ssh {}{dest}` logs in without a prompt (yolo runs ssh with BatchMode) and that the engine's socket is {REMOTE_SOCKET} there",
                        port.map(|p| format!("-p {p} ")).unwrap_or_default()
                    )),
                });
            }
            if std::time::Instant::now() > deadline {
                return Err(Error::dependency(
                    Dependency::Ssh,
                    format!(
                        "ssh to {} did not forward the engine's socket within 30 s",
                        crate::visible::escape_controls(host)
                    ),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_are_local_and_network_addresses_remote() {
        assert!(!is_remote_host("unix:///var/run/docker.sock"));
        assert!(!is_remote_host("npipe:////./pipe/docker_engine"));
        assert!(is_remote_host("tcp://127.0.0.1:2375"));
        assert!(is_remote_host("ssh://me@build-box"));
        assert!(is_remote_host("https://h:2376"));
    }
}
