//! Images: use a local image or pull it, or build one from a Dockerfile through the Engine API
//! with live progress.

use super::{is_not_found, labels, message, Engine, NetworkAttach};
use crate::error::{Error, Result};
use crate::run_spec::{BuildSpec, ImageSource};
use bollard::query_parameters::{BuildImageOptions, CreateImageOptions};
use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

const TAIL_LINES: usize = 20;

impl Engine {
    /// Whether [`Engine::ensure_image`] would run a build (and so its RUN steps): a Dockerfile
    /// whose inputs changed since the tagged image was built, or `rebuild`. A pull runs nothing.
    pub(crate) async fn build_needed(&self, source: &ImageSource, rebuild: bool) -> Result<bool> {
        let ImageSource::Build(build) = source else {
            return Ok(false);
        };
        if rebuild {
            return Ok(true);
        }
        let current = self.image_label(&build.tag, labels::BUILD_HASH).await?;
        Ok(current.as_deref() != Some(&build_hash(build)?))
    }

    /// The image of `source` for the project `devcontainer_id`: pulled if missing, built if its
    /// inputs changed (or `rebuild`). The build's RUN steps get `network` and nothing else:
    /// the guard's namespace (`container:<guard>`) or none, never the engine's default bridge.
    pub(crate) async fn ensure_image(
        &self,
        source: &ImageSource,
        rebuild: bool,
        devcontainer_id: &str,
        network: &NetworkAttach,
    ) -> Result<String> {
        match source {
            ImageSource::Image(name) => {
                if !self.image_exists(name).await? {
                    self.pull(name).await?;
                }
                Ok(name.clone())
            }
            ImageSource::Build(build) => {
                let hash = build_hash(build)?;
                if !rebuild
                    && self
                        .image_label(&build.tag, labels::BUILD_HASH)
                        .await?
                        .as_deref()
                        == Some(&hash)
                {
                    return Ok(build.tag.clone());
                }
                self.build(build, &hash, rebuild, devcontainer_id, network)
                    .await?;
                Ok(build.tag.clone())
            }
        }
    }

    pub(crate) async fn image_exists(&self, name: &str) -> Result<bool> {
        match self.docker.inspect_image(name).await {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(Error::docker(
                format!("inspecting image {name}"),
                message(&e),
            )),
        }
    }

    /// The `devcontainer.metadata` label of the local image `name` (`None`: no such image, or
    /// no label).
    pub(crate) async fn metadata_label(&self, name: &str) -> Result<Option<String>> {
        self.image_label(name, crate::devcontainer::metadata::LABEL)
            .await
    }

    async fn image_label(&self, name: &str, key: &str) -> Result<Option<String>> {
        match self.docker.inspect_image(name).await {
            Ok(img) => Ok(img
                .config
                .and_then(|c| c.labels)
                .and_then(|l| l.get(key).cloned())),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(Error::docker(
                format!("inspecting image {name}"),
                message(&e),
            )),
        }
    }

    async fn pull(&self, name: &str) -> Result<()> {
        let bar = spinner(&format!("pulling {name}"));
        let options = CreateImageOptions {
            from_image: Some(name.to_string()),
            platform: self.platform.clone().unwrap_or_default(),
            ..Default::default()
        };
        let mut stream = self.docker.create_image(Some(options), None, None);
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(detail) = info.error_detail {
                        bar.finish_and_clear();
                        return Err(pull_error(name, detail.message.unwrap_or_default()));
                    }
                    let status = [info.id, info.status]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                        .join(" ");
                    let shown = crate::visible::escape_controls(&format!("{name}: {status}"));
                    bar.set_message(format!("pulling {shown}"));
                }
                Err(e) => {
                    bar.finish_and_clear();
                    return Err(pull_error(name, message(&e)));
                }
            }
        }
        bar.finish_and_clear();
        Ok(())
    }

    async fn build(
        &self,
        build: &BuildSpec,
        hash: &str,
        no_cache: bool,
        devcontainer_id: &str,
        network: &NetworkAttach,
    ) -> Result<()> {
        let lowered = lowered(build)?;
        for note in lowered.iter().flat_map(|l| &l.notes) {
            eprintln!(
                "{} {}: {}",
                console::style("note:").yellow(),
                build.dockerfile,
                crate::visible::escape_controls(note)
            );
        }
        let tar = context_tar(build, lowered.as_ref())?;
        let dockerfile = match (&build.extra_ca, &lowered) {
            (Some(_), _) => CA_DOCKERFILE.to_string(),
            (None, Some(_)) => crate::dockerfile_lower::DOCKERFILE.to_string(),
            (None, None) => build.dockerfile.clone(),
        };
        let options = BuildImageOptions {
            dockerfile,
            t: Some(build.tag.clone()),
            buildargs: Some(build.args.clone().into_iter().collect()),
            target: build.target.clone().unwrap_or_default(),
            cachefrom: (!build.cache_from.is_empty()).then(|| build.cache_from.clone()),
            labels: Some(
                labels::built_image(build, hash, devcontainer_id)
                    .into_iter()
                    .collect(),
            ),
            nocache: no_cache,
            networkmode: Some(network.mode()),
            platform: self.platform.clone().unwrap_or_default(),
            rm: true,
            forcerm: true,
            ..Default::default()
        };
        let tag = build.tag.clone();
        self.run_build(options, tar, &tag)
            .await
            .map_err(|(msg, tail)| build_error(build, msg, &tail))
    }

    /// Run a build with a spinner showing its output; on failure Docker's message and the
    /// output's last lines.
    async fn run_build(
        &self,
        options: BuildImageOptions,
        tar: Vec<u8>,
        tag: &str,
    ) -> std::result::Result<(), (String, VecDeque<String>)> {
        let tar = bytes::Bytes::from(tar);
        match self.run_build_once(options.clone(), tar.clone(), tag).await {
            // A cached layer the build stood on was removed meanwhile (`docker image prune`,
            // another project's clean-up): once more, without the cache.
            Err((message, _)) if cache_vanished(&message) => {
                eprintln!(
                    "{} a cached layer went away during the build ({}); building {tag} again without the cache",
                    console::style("yolo:").bold(),
                    crate::visible::escape_controls(message.trim())
                );
                let options = BuildImageOptions {
                    nocache: true,
                    ..options
                };
                self.run_build_once(options, tar, tag).await
            }
            other => other,
        }
    }

    async fn run_build_once(
        &self,
        options: BuildImageOptions,
        tar: bytes::Bytes,
        tag: &str,
    ) -> std::result::Result<(), (String, VecDeque<String>)> {
        let bar = spinner(&format!("building {tag}"));
        let mut tail: VecDeque<String> = VecDeque::new();
        let mut pending = String::new();
        let mut steps = StepImages::default();
        // When the build began, by this clock, less a margin for an engine elsewhere whose
        // clock runs behind: what a failed build may remove was made after it.
        let began = chrono::Utc::now() - chrono::TimeDelta::seconds(60);
        let body = bollard::body_full(tar);
        let mut stream = self.docker.build_image(options, None, Some(body));
        let failure = loop {
            let Some(item) = stream.next().await else {
                break None;
            };
            let info = match item {
                Ok(info) => info,
                Err(e) => break Some(message(&e)),
            };
            if let Some(detail) = info.error_detail {
                break Some(detail.message.unwrap_or_default());
            }
            // The stream's pieces are not lines (a RUN step's output arrives as it is written,
            // a word at a time): lines are assembled before they are shown or kept.
            if let Some(piece) = &info.stream {
                pending.push_str(piece);
            }
            while let Some(end) = pending.find('\n') {
                let line: String = pending.drain(..=end).collect();
                steps.read(&line);
                keep_line(&bar, tag, &mut tail, &line);
            }
        };
        let rest = std::mem::take(&mut pending);
        keep_line(&bar, tag, &mut tail, &rest);
        bar.finish_and_clear();
        match failure {
            None => Ok(()),
            Some(msg) => {
                drop(stream);
                // The last step's image first: each layer is its parent's only child once
                // the layers after it are gone.
                for made in steps.made() {
                    self.remove_failed_layer(made, began).await;
                }
                Err((msg, tail))
            }
        }
    }

    /// Remove an image a failed build made (its parents are removed in their turn: the list
    /// runs child first, and Docker's pruning of parents is off, so nothing the build did not
    /// list goes). The build's output is the repository's too, so the id is checked before:
    /// an image with a tag or a digest (pulled, pushed, named) stays, and so does one made
    /// before the build began; Docker refuses one that a container or another layer uses.
    async fn remove_failed_layer(&self, id: &str, began: chrono::DateTime<chrono::Utc>) {
        let Ok(image) = self.docker.inspect_image(id).await else {
            return;
        };
        let named = !image.repo_tags.unwrap_or_default().is_empty()
            || !image.repo_digests.unwrap_or_default().is_empty();
        let made_since = image
            .created
            .as_deref()
            .and_then(|c| chrono::DateTime::parse_from_rfc3339(c).ok())
            .is_some_and(|created| created >= began);
        let Some(full_id) = image.id.filter(|_| !named && made_since) else {
            return;
        };
        let options = bollard::query_parameters::RemoveImageOptions {
            noprune: true,
            ..Default::default()
        };
        let _ = self
            .docker
            .remove_image(&full_id, Some(options), None)
            .await;
    }

    /// What the Features build needs of its base image.
    pub(crate) async fn base_facts(&self, name: &str) -> Result<BaseFacts> {
        let image = self
            .docker
            .inspect_image(name)
            .await
            .map_err(|e| Error::docker(format!("inspecting image {name}"), message(&e)))?;
        let config = image.config.unwrap_or_default();
        Ok(BaseFacts {
            id: image.id.unwrap_or_default(),
            user: config.user.filter(|u| !u.is_empty()),
            metadata: config.labels.and_then(|l| l.get(labels::METADATA).cloned()),
            on_build: config.on_build.unwrap_or_default(),
        })
    }

    /// Build the image with Features `tag` from the context `tar` (`features::install`), its
    /// RUN steps in `network` only, labelled with the merged `metadata` label and the inputs
    /// `digest`, unless the tag already is that build (same digest): then nothing is built.
    /// Whether it built. A failure names the Feature that was installing.
    pub(crate) async fn build_features(
        &self,
        features: &FeaturesBuild<'_>,
        network: &NetworkAttach,
    ) -> Result<bool> {
        let tag = features.tag;
        if !features.no_cache && self.features_image_current(tag, features.digest).await? {
            return Ok(false);
        }
        let options = BuildImageOptions {
            dockerfile: crate::devcontainer::features::install::DOCKERFILE.to_string(),
            t: Some(tag.to_string()),
            labels: Some(
                labels::features_image(
                    features.devcontainer_id,
                    features.digest,
                    features.metadata,
                )
                .into_iter()
                .collect(),
            ),
            networkmode: Some(network.mode()),
            nocache: features.no_cache,
            rm: true,
            forcerm: true,
            ..Default::default()
        };
        self.run_build(options, features.tar.clone(), tag)
            .await
            .map_err(|(msg, tail)| features_error(features, msg, &tail))?;
        Ok(true)
    }
}

impl Engine {
    /// Whether the image `tag` is the result of a Features build with inputs `digest`.
    pub(crate) async fn features_image_current(&self, tag: &str, digest: &str) -> Result<bool> {
        Ok(self
            .image_label(tag, labels::FEATURES_HASH)
            .await?
            .as_deref()
            == Some(digest))
    }
}

/// The base image of a Features build, as `Engine::base_facts` reads it.
#[derive(Debug, Clone)]
pub(crate) struct BaseFacts {
    pub(crate) id: String,
    /// `Config.User`, unset when empty.
    pub(crate) user: Option<String>,
    /// Its `devcontainer.metadata` label.
    pub(crate) metadata: Option<String>,
    /// Its `ONBUILD` triggers: the Features' build, `FROM` it, runs them.
    pub(crate) on_build: Vec<String>,
}

/// A Features build (`Engine::build_features`).
pub(crate) struct FeaturesBuild<'a> {
    pub(crate) tag: &'a str,
    pub(crate) tar: Vec<u8>,
    pub(crate) digest: &'a str,
    pub(crate) metadata: &'a str,
    pub(crate) devcontainer_id: &'a str,
    /// Where the context was written, for the message of a failure.
    pub(crate) context: &'a Path,
    /// `--rebuild`: build even when current, without Docker's cache.
    pub(crate) no_cache: bool,
    /// The user's extra CA certificates are in the build (for the hint of a certificate error).
    pub(crate) extra_ca: bool,
}

/// Docker's words for a build whose cached layer was removed under it.
/// Docker's ways of saying a layer the build was reusing is gone (removed while the build ran).
pub(super) fn cache_vanished(message: &str) -> bool {
    message.contains("unknown parent image ID")
        || (message.contains("failed to get digest") && message.contains("no such file"))
        || message.contains("No such image: sha256:")
}

/// The layers a classic (non-BuildKit) build made, read from its output: each step ends with
/// ` ---> <id>`, the image it made; a `FROM` step's is the base, which the build did not make.
/// Docker keeps a failed build's finished steps as untagged images that nothing names: the
/// last one of each stage has no child, and removing it takes the untagged layers under it.
/// BuildKit prints none of this and keeps its layers in its own cache, which Docker's garbage
/// collection empties.
/// A step answered from the cache (` ---> Using cache`) made nothing: its image is an earlier
/// build's, whose later steps or stages may still need it.
#[derive(Debug, Default)]
struct StepImages {
    /// The current step is a `FROM`, or was answered from the cache.
    made_nothing: bool,
    /// In the order the steps finished.
    made: Vec<String>,
}

impl StepImages {
    fn read(&mut self, line: &str) {
        let line = line.trim_end_matches(['\n', '\r']);
        if let Some(step) = line.strip_prefix("Step ") {
            // "Step 2/5 : FROM base AS stage"
            let instruction = step.split_once(" : ").map(|(_, rest)| rest);
            self.made_nothing = instruction
                .and_then(|i| i.split_whitespace().next())
                .is_some_and(|word| word.eq_ignore_ascii_case("from"));
        } else if let Some(rest) = line.strip_prefix(" ---> ") {
            let id = rest.trim();
            if id == "Using cache" {
                self.made_nothing = true;
            } else if id.len() >= 12
                && id.bytes().all(|b| b.is_ascii_hexdigit())
                && !self.made_nothing
            {
                self.made.push(id.to_string());
            }
        }
    }

    /// What the build made, the last first (a child before its parent).
    fn made(&self) -> impl Iterator<Item = &str> {
        self.made.iter().rev().map(String::as_str)
    }
}

/// One line of a build's output: shown on the spinner, kept among the last `TAIL_LINES`.
fn keep_line(bar: &ProgressBar, tag: &str, tail: &mut VecDeque<String>, line: &str) {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.trim().is_empty() {
        return;
    }
    // RUN steps print what the repository wrote: shown, not obeyed.
    let shown = crate::visible::escape_controls(line.trim());
    bar.set_message(format!("building {tag}: {shown}"));
    // Build output carries colour codes (RUN steps writing to stderr): not in our message.
    tail.push_back(console::strip_ansi_codes(line).into_owned());
    if tail.len() > TAIL_LINES {
        tail.pop_front();
    }
}

fn features_error(features: &FeaturesBuild, msg: String, tail: &VecDeque<String>) -> Error {
    let lines: Vec<String> = tail.iter().cloned().collect();
    let which = crate::devcontainer::features::install::failed_feature(&lines);
    let mut text = msg.trim().to_string();
    if !tail.is_empty() {
        text.push_str("\n  last build output:");
        for line in tail {
            text.push_str("\n    ");
            text.push_str(line.trim_end());
        }
    }
    let action = match &which {
        Some(key) => format!(
            "installing Feature \"{}\" (building {})",
            crate::visible::escape_controls(key),
            features.tag
        ),
        None => format!("building {} with its Features", features.tag),
    };
    let hint = crate::ca::certificate_hint(&text, features.extra_ca).unwrap_or_else(|| format!(
        "the Feature's install.sh failed; fix it or its options in devcontainer.json, then run `yolo up` again (the build context is in {})",
        features.context.display()
    ));
    Error::Docker {
        action,
        message: text,
        hint: Some(hint),
    }
}

pub(super) fn spinner(message: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(crate::visible::escape_controls(message));
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

fn pull_error(name: &str, msg: String) -> Error {
    Error::Docker {
        action: format!("pulling image {name}"),
        message: msg,
        hint: Some(format!(
            "the image is not on this machine and could not be pulled; check the name, your registry access, or build it (`docker build -t {name} ...`) or use \"build\" in devcontainer.json"
        )),
    }
}

fn build_error(build: &BuildSpec, msg: String, tail: &VecDeque<String>) -> Error {
    let mut text = msg.trim().to_string();
    if !tail.is_empty() {
        text.push_str("\n  last build output:");
        for line in tail {
            text.push_str("\n    ");
            text.push_str(line.trim_end());
        }
    }
    let hint = crate::ca::certificate_hint(&text, build.extra_ca.is_some())
        .or_else(|| buildkit_hint(&text))
        .unwrap_or_else(|| "fix the Dockerfile, then run `yolo up --rebuild`".into());
    Error::Docker {
        action: format!("building {} from {}", build.tag, build.context.display()),
        message: text,
        hint: Some(hint),
    }
}

/// The classic builder's words for syntax only BuildKit knows (what `dockerfile_lower` does not
/// lower, say a newer instruction): the Dockerfile is not broken, it needs BuildKit.
fn buildkit_hint(text: &str) -> Option<String> {
    let needs = text.contains("requires BuildKit")
        || text.contains("unknown instruction")
        || text.contains("unknown flag");
    needs.then(|| "the Dockerfile uses BuildKit syntax that yolo does not lower for the classic builder, which it builds with so that RUN steps stay behind its firewall; build the image yourself with BuildKit (`docker buildx build -t NAME ...`) and name it in devcontainer.json (\"image\": \"NAME\")".into())
}

/// Hash of what decides the build and is cheap to read: the BuildSpec and the Dockerfile text.
/// Other context files changing is what `--rebuild` is for.
fn build_hash(build: &BuildSpec) -> Result<String> {
    let dockerfile = build
        .dockerfile_outside
        .clone()
        .unwrap_or_else(|| build.context.join(&build.dockerfile));
    let text = crate::digest::read(&dockerfile).map_err(|e| Error::io(&dockerfile, e))?;
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(build).unwrap_or_default());
    hasher.update(&text);
    Ok(hex::encode(hasher.finalize()))
}

/// The build's Dockerfile with its BuildKit syntax lowered for the classic builder
/// (`dockerfile_lower`), when it has any. What cannot be lowered was refused when the project
/// was read; a Dockerfile changed since is refused here, before anything is built.
fn lowered(build: &BuildSpec) -> Result<Option<crate::dockerfile_lower::Lowered>> {
    let path = dockerfile_path(build);
    let text = crate::digest::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    match crate::dockerfile_lower::lower(&text) {
        Ok(lowered) => Ok(lowered.changed.then_some(lowered)),
        Err(found) => Err(Error::Unsupported {
            file: path.clone(),
            property: "build.dockerfile".into(),
            message: crate::dockerfile_lower::refusal_message(&path.display().to_string(), &found),
        }),
    }
}

fn dockerfile_path(build: &BuildSpec) -> std::path::PathBuf {
    build
        .dockerfile_outside
        .clone()
        .unwrap_or_else(|| build.context.join(&build.dockerfile))
}

/// A tar of the build context that honours `.dockerignore` (patterns anchored at the context
/// root, as Docker reads them). The Dockerfile is always included; so are the lowered
/// Dockerfile and its files, when the Dockerfile had BuildKit syntax.
fn context_tar(
    build: &BuildSpec,
    lowered: Option<&crate::dockerfile_lower::Lowered>,
) -> Result<Vec<u8>> {
    let root = &build.context;
    if !root.is_dir() {
        return Err(Error::Config {
            file: root.clone(),
            line: None,
            column: None,
            property: None,
            message:
                "the build context is not a folder (check \"build.context\" in devcontainer.json)"
                    .into(),
        });
    }
    let ignore = dockerignore(root)?;
    let mut tar = tar::Builder::new(Vec::new());
    tar.follow_symlinks(false);
    let walker = ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .follow_links(false)
        .build();
    for entry in walker {
        let entry = entry.map_err(|e| Error::io(root, std::io::Error::other(e)))?;
        let path = entry.path();
        let Ok(rel) = path.strip_prefix(root) else {
            continue;
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        let keep = rel == Path::new(&build.dockerfile) || rel == Path::new(".dockerignore");
        if !keep && ignore.matched_path_or_any_parents(rel, is_dir).is_ignore() {
            continue;
        }
        tar.append_path_with_name(path, rel)
            .map_err(|e| Error::io(path, e))?;
    }
    if let Some(outside) = &build.dockerfile_outside {
        let mut file = std::fs::File::open(outside).map_err(|e| Error::io(outside, e))?;
        tar.append_file(&build.dockerfile, &mut file)
            .map_err(|e| Error::io(outside, e))?;
    }
    if let Some(lowered) = lowered {
        append_lowered(&mut tar, root, &ignore, lowered)?;
    }
    if let Some(ca) = &build.extra_ca {
        // The user's CA certificates, and the Dockerfile that trusts them after every FROM,
        // built in place of the repository's (whose text it keeps otherwise, lowered when it
        // had BuildKit syntax).
        let text = match lowered {
            Some(lowered) => lowered.text.clone(),
            None => {
                let path = dockerfile_path(build);
                crate::digest::read_to_string(&path).map_err(|e| Error::io(&path, e))?
            }
        };
        let rewritten = crate::ca::rewrite_dockerfile(&text);
        let files = ca
            .files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .chain([(CA_DOCKERFILE, rewritten.as_str())]);
        for (name, content) in files {
            let mut header = tar::Header::new_gnu();
            header.set_mode(0o644);
            header.set_size(content.len() as u64);
            tar.append_data(&mut header, name, content.as_bytes())
                .map_err(|e| Error::io(root, e))?;
        }
    }
    tar.into_inner().map_err(|e| Error::io(root, e))
}

/// The lowered Dockerfile and the files it copies (heredocs; the context's files again, with
/// the mode of a `--chmod`) added to the context's tar. A context file is read only when it is
/// inside the context for real (no link leading out: a repository's Dockerfile must not send
/// the host's files to Docker) and not excluded by `.dockerignore`; links inside a copied
/// folder go in as links.
fn append_lowered(
    tar: &mut tar::Builder<Vec<u8>>,
    root: &Path,
    ignore: &ignore::gitignore::Gitignore,
    lowered: &crate::dockerfile_lower::Lowered,
) -> Result<()> {
    use crate::dockerfile_lower::Content;
    let data = |tar: &mut tar::Builder<Vec<u8>>, name: &str, bytes: &[u8], mode: u32| {
        let mut header = tar::Header::new_gnu();
        header.set_mode(mode);
        header.set_size(bytes.len() as u64);
        tar.append_data(&mut header, name, bytes)
            .map_err(|e| Error::io(root, e))
    };
    data(
        tar,
        crate::dockerfile_lower::DOCKERFILE,
        lowered.text.as_bytes(),
        0o644,
    )?;
    let real_root = root.canonicalize().map_err(|e| Error::io(root, e))?;
    for file in &lowered.files {
        match &file.content {
            Content::Data(bytes) => data(tar, &file.name, bytes, file.mode.unwrap_or(0o644))?,
            Content::Context(rel) => {
                let path = root.join(rel);
                let real = path.canonicalize().map_err(|e| Error::io(&path, e))?;
                if !real.starts_with(&real_root) || real == real_root {
                    return Err(Error::Unsupported {
                        file: path.clone(),
                        property: "build.dockerfile".into(),
                        message: format!(
                            "a COPY --chmod source, {rel}, leads outside the build context (through a link); yolo sends nothing from outside the context to Docker"
                        ),
                    });
                }
                let walker = ignore::WalkBuilder::new(&real)
                    .standard_filters(false)
                    .follow_links(false)
                    .build();
                for entry in walker {
                    let entry = entry.map_err(|e| Error::io(&path, std::io::Error::other(e)))?;
                    let Ok(inner) = entry.path().strip_prefix(&real_root) else {
                        continue;
                    };
                    let kind = entry.file_type();
                    let is_dir = kind.is_some_and(|t| t.is_dir());
                    if ignore
                        .matched_path_or_any_parents(inner, is_dir)
                        .is_ignore()
                    {
                        continue;
                    }
                    let below = entry.path().strip_prefix(&real).unwrap_or(Path::new(""));
                    // (`join("")` would end the name with a `/`, a folder's to the engine.)
                    let name = if below.as_os_str().is_empty() {
                        std::path::PathBuf::from(&file.name)
                    } else {
                        Path::new(&file.name).join(below)
                    };
                    let mut header = tar::Header::new_gnu();
                    let meta = std::fs::symlink_metadata(entry.path())
                        .map_err(|e| Error::io(entry.path(), e))?;
                    header.set_metadata(&meta);
                    if !meta.file_type().is_symlink() {
                        if let Some(mode) = file.mode {
                            header.set_mode(mode);
                        }
                    }
                    if meta.is_file() {
                        let f = std::fs::File::open(entry.path())
                            .map_err(|e| Error::io(entry.path(), e))?;
                        tar.append_data(&mut header, &name, f)
                            .map_err(|e| Error::io(entry.path(), e))?;
                    } else if meta.file_type().is_symlink() {
                        let target = std::fs::read_link(entry.path())
                            .map_err(|e| Error::io(entry.path(), e))?;
                        tar.append_link(&mut header, &name, target)
                            .map_err(|e| Error::io(entry.path(), e))?;
                    } else if meta.is_dir() {
                        tar.append_data(&mut header, &name, std::io::empty())
                            .map_err(|e| Error::io(entry.path(), e))?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// The name of the rewritten Dockerfile in a context with the user's CA certificates.
const CA_DOCKERFILE: &str = ".yolo-ca.Dockerfile";

fn dockerignore(root: &Path) -> Result<ignore::gitignore::Gitignore> {
    let mut builder = ignore::gitignore::GitignoreBuilder::new(root);
    let path = root.join(".dockerignore");
    if let Ok(text) = crate::digest::read_to_string(&path) {
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (neg, pat) = line.strip_prefix('!').map_or(("", line), |p| ("!", p));
            // Docker anchors every pattern at the context root; gitignore only anchors ones with '/'.
            let anchored = if pat.starts_with('/') || pat.starts_with("**") {
                pat.to_string()
            } else {
                format!("/{pat}")
            };
            builder
                .add_line(None, &format!("{neg}{anchored}"))
                .map_err(|e| dockerignore_error(&path, e))?;
        }
    }
    builder.build().map_err(|e| dockerignore_error(&path, e))
}

fn dockerignore_error(path: &Path, e: ignore::Error) -> Error {
    Error::Config {
        file: path.to_path_buf(),
        line: None,
        column: None,
        property: None,
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_layer_removed_under_a_build_is_recognised() {
        assert!(cache_vanished(
            "failed to export image: failed to set parent sha256:3d: unknown parent image ID sha256:3d"
        ));
        assert!(cache_vanished("failed to get digest sha256:a6: open /var/lib/docker/image/overlay2/imagedb/content/sha256/a6: no such file or directory"));
        // Seen when another test's clean-up removed the image a cached step stood on.
        assert!(cache_vanished(
            "Docker stream error: No such image: sha256:8bcbe9c501a856cc67fde842dd538794e93e9306c81f4543025856bab8fb3c14"
        ));
        assert!(!cache_vanished("No such image: debian:bookwrm"));
        assert!(!cache_vanished(
            "The command '/bin/sh -c make' returned a non-zero code: 2"
        ));
    }

    #[test]
    fn a_failed_builds_last_made_layer_is_read_from_its_output_and_never_the_base() {
        let mut steps = StepImages::default();
        for line in [
            "Step 1/4 : FROM debian:bookworm-slim\n",
            " ---> 998cc7442b28\n",
        ] {
            steps.read(line);
        }
        assert_eq!(steps.made().count(), 0, "the base is not the build's");
        for line in [
            "Step 2/4 : RUN echo made > /made\n",
            " ---> Running in 0123456789ab\n",
            "Removing intermediate container 0123456789ab\n",
            " ---> 5d2a214bc376\n",
            "Step 3/4 : from other AS second\n",
            " ---> abcdefabcdef\n",
            "Step 4/4 : RUN exit 3\n",
            " ---> Running in 0123456789ab\n",
        ] {
            steps.read(line);
        }
        assert_eq!(steps.made().collect::<Vec<_>>(), ["5d2a214bc376"]);
        // A cached step's image is an earlier build's; a FROM with a tab is a FROM; what is
        // not an image id is not one.
        for line in [
            "Step 5/8 : COPY . /src",
            " ---> Using cache",
            " ---> 7c70c1d8be2c",
            "Step 6/8 : FROM\tthird",
            " ---> 0b39bbaed99b",
            "Step 7/8 : RUN make",
            " ---> not-an-id",
            "Step 8/8 : RUN make install",
            " ---> Running in 0123456789ab",
            " ---> 84107273fa86",
        ] {
            steps.read(line);
        }
        assert_eq!(
            steps.made().collect::<Vec<_>>(),
            ["84107273fa86", "5d2a214bc376"]
        );
    }
}
