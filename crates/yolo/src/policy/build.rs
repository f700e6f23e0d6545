//! The image: a named `image`, or a build (`build.dockerfile`/`dockerFile`, context, args,
//! target, options). A Dockerfile or context outside the repository needs `host-mount`, since
//! the context is sent to Docker and can be copied into the image.

use super::grants::Need;
use super::Eval;
use crate::devcontainer::names::image_tag;
use crate::error::Result;
use crate::paths::{normalize_path, slash_path};
use crate::run_spec::{BuildSpec, ImageSource};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The name in the build context of a Dockerfile that lives outside it (yolo adds it to the tar).
pub(crate) const OUTSIDE_DOCKERFILE: &str = ".yolo.Dockerfile";

impl Eval<'_> {
    pub(super) fn image_source(&mut self) -> Result<ImageSource> {
        let c = self.config;
        let build = c.build.as_ref();
        let dockerfile = build
            .and_then(|b| b.dockerfile.as_deref())
            .or(c.docker_file.as_deref());
        match (dockerfile, &c.image) {
            (Some(dockerfile), _) => self.build_spec(dockerfile).map(ImageSource::Build),
            (None, Some(image)) if !image.trim().is_empty() => {
                Ok(ImageSource::Image(image.clone()))
            }
            (None, _) if build.is_some() => {
                Err(self.config_error("build.dockerfile", "\"build\" needs a \"dockerfile\""))
            }
            (None, _) => Err(self.config_error(
                "image",
                "devcontainer.json needs \"image\" or \"build.dockerfile\"",
            )),
        }
    }

    fn config_dir(&self) -> PathBuf {
        self.input
            .config_file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// A path of the build, relative to the config file's folder; outside the repository it needs
    /// `host-mount`, because the build context is sent to Docker and can be copied into the image.
    fn build_path(&mut self, property: &str, relative: &str) -> Result<PathBuf> {
        let joined = self.config_dir().join(relative);
        let path = normalize_path(&joined).ok_or_else(|| {
            self.config_error(
                property,
                format!("\"{relative}\" does not resolve to an absolute path"),
            )
        })?;
        let roots = [
            Some(self.input.workspace.to_path_buf()),
            self.git_root.clone(),
            Some(self.config_dir()),
        ];
        if !roots.iter().flatten().any(|root| path.starts_with(root)) {
            let value = format!("the host folder {} outside the repository", path.display());
            let reason = "files outside the repository could be copied into the image";
            self.require(Need::HostMount(path.clone()), property, &value, reason)?;
        }
        Ok(path)
    }

    fn build_spec(&mut self, dockerfile: &str) -> Result<BuildSpec> {
        let c = self.config;
        let build = c.build.clone().unwrap_or_default();
        let df_property = if c
            .build
            .as_ref()
            .and_then(|b| b.dockerfile.as_ref())
            .is_some()
        {
            "build.dockerfile"
        } else {
            "dockerFile"
        };
        let dockerfile_path = self.build_path(df_property, dockerfile)?;
        let context = match build.context.as_deref().or(c.context.as_deref()) {
            Some(ctx) => self.build_path("build.context", ctx)?,
            None => dockerfile_path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
        };
        let (dockerfile, dockerfile_outside) = match dockerfile_path.strip_prefix(&context) {
            Ok(rel) if !rel.as_os_str().is_empty() => (slash_path(rel), None),
            _ => (
                OUTSIDE_DOCKERFILE.to_string(),
                Some(dockerfile_path.clone()),
            ),
        };
        let mut spec = BuildSpec {
            context,
            dockerfile,
            dockerfile_outside,
            args: build.args.clone(),
            target: build.target.clone(),
            platform: None,
            cache_from: build.cache_from.0.clone(),
            labels: BTreeMap::new(),
            tag: image_tag(self.input.workspace, self.input.devcontainer_id),
            extra_ca: None,
        };
        self.apply_build_options(&mut spec, &build.options)?;
        Ok(spec)
    }

    /// `build.options`: `--build-arg K=V`, `--label K=V`, `--target T`, `--platform P` (the
    /// build's, and the container's unless runArgs names another) are applied; `--no-cache`
    /// and `--pull` are accepted and ignored (`yolo up --rebuild` decides about caches).
    fn apply_build_options(&mut self, spec: &mut BuildSpec, options: &[String]) -> Result<()> {
        let mut i = 0;
        while i < options.len() {
            let property = format!("build.options[{i}]");
            let (flag, inline) = match options[i].split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
                _ => (options[i].as_str(), None),
            };
            let takes_value = matches!(flag, "--build-arg" | "--label" | "--target" | "--platform");
            let value = match inline {
                Some(v) => v,
                None if takes_value => {
                    i += 1;
                    let next = options.get(i).cloned();
                    next.ok_or_else(|| {
                        self.config_error(&property, format!("{flag} needs a value"))
                    })?
                }
                None => String::new(),
            };
            self.apply_build_option(spec, &property, flag, value)?;
            i += 1;
        }
        Ok(())
    }

    fn apply_build_option(
        &self,
        spec: &mut BuildSpec,
        property: &str,
        flag: &str,
        value: String,
    ) -> Result<()> {
        match flag {
            "--build-arg" => {
                let (k, v) = value.split_once('=').ok_or_else(|| {
                    self.config_error(property, format!("--build-arg \"{value}\" needs NAME=VALUE"))
                })?;
                spec.args.insert(k.into(), v.into());
            }
            "--label" => {
                let (k, v) = value.split_once('=').unwrap_or((value.as_str(), ""));
                self.check_label_key(property, k)?;
                spec.labels.insert(k.into(), v.into());
            }
            "--target" => spec.target = Some(value),
            "--platform" => {
                if !super::run_extras::valid_platform(&value) {
                    return Err(self.config_error(
                        property,
                        format!("--platform \"{value}\" is not OS/ARCH[/VARIANT], like linux/amd64"),
                    ));
                }
                spec.platform = Some(value);
            }
            "--no-cache" | "--pull" => {}
            other => {
                return Err(self.config_error(
                    property,
                    format!("yolo does not apply the build option \"{other}\"; accepted: --build-arg, --label, --target, --platform, --no-cache, --pull"),
                ))
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::run_spec::ImageSource;
    use serde_json::json;
    use std::path::PathBuf;

    #[test]
    fn build_paths_are_relative_to_the_config_folder() {
        let spec = ok(
            json!({"build": {"dockerfile": "Dockerfile", "args": {"A": "1"}, "target": "dev", "cacheFrom": "img:cache"}}),
        );
        let ImageSource::Build(build) = spec.image else {
            panic!("not a build")
        };
        assert_eq!(build.context, PathBuf::from(format!("{WS}/.devcontainer")));
        assert_eq!(build.dockerfile, "Dockerfile");
        assert_eq!(build.dockerfile_outside, None);
        assert_eq!(build.args["A"], "1");
        assert_eq!(build.target.as_deref(), Some("dev"));
        assert_eq!(build.cache_from, ["img:cache"]);
        assert_eq!(build.tag, "yolo-my-repo-0123456789ab:latest");
        assert!(
            build.labels.is_empty(),
            "yolo's own labels are the engine's"
        );
    }

    #[test]
    fn build_context_and_legacy_forms() {
        let spec = ok(json!({"build": {"dockerfile": "Dockerfile", "context": ".."}}));
        let ImageSource::Build(build) = spec.image else {
            panic!()
        };
        assert_eq!(build.context, PathBuf::from(WS));
        assert_eq!(build.dockerfile, ".devcontainer/Dockerfile");
        let spec = ok(json!({"dockerFile": "../docker/Dockerfile.dev", "context": "../app"}));
        let ImageSource::Build(build) = spec.image else {
            panic!()
        };
        assert_eq!(build.context, PathBuf::from(format!("{WS}/app")));
        assert_eq!(build.dockerfile, ".yolo.Dockerfile");
        assert_eq!(
            build.dockerfile_outside,
            Some(PathBuf::from(format!("{WS}/docker/Dockerfile.dev")))
        );
        let spec = ok(json!({"image": "ignored", "build": {"dockerfile": "Dockerfile"}}));
        assert!(matches!(spec.image, ImageSource::Build(_)));
    }

    #[test]
    fn build_context_outside_the_repository_needs_host_mount() {
        let c = case(json!({"build": {"dockerfile": "Dockerfile", "context": "../../.."}}));
        let (property, value, grant) = refused(c.run());
        assert_eq!(property, "build.context");
        assert!(value.contains("/home/me"), "{value}");
        assert_grant_text(&grant, "host-mount=/home/me");
        assert!(c.grant(&["host-mount=/home"]).run().is_ok());
        let (property, _, _) =
            refused(case(json!({"build": {"dockerfile": "/etc/Dockerfile"}})).run());
        assert_eq!(property, "build.dockerfile");
    }

    #[test]
    fn build_options() {
        let spec = ok(
            json!({"build": {"dockerfile": "Dockerfile", "args": {"A": "1"}, "options": [
                "--build-arg", "A=2", "--build-arg=B=3", "--label", "x=y", "--target=prod", "--no-cache", "--pull"
            ]}}),
        );
        let ImageSource::Build(build) = &spec.image else {
            panic!()
        };
        assert_eq!(build.args["A"], "2");
        assert_eq!(build.args["B"], "3");
        assert_eq!(build.labels["x"], "y");
        assert_eq!(build.target.as_deref(), Some("prod"));
        assert_eq!(spec.platform, None);
        // `--platform` is the build's and, unless runArgs name another, the container's.
        let spec = ok(
            json!({"build": {"dockerfile": "Dockerfile", "options": ["--platform", "linux/amd64"]}}),
        );
        assert_eq!(spec.platform.as_deref(), Some("linux/amd64"));
        let spec = ok(
            json!({"build": {"dockerfile": "Dockerfile", "options": ["--platform=linux/amd64"]},
            "runArgs": ["--platform=linux/arm64"]}),
        );
        assert_eq!(spec.platform.as_deref(), Some("linux/arm64"));
        for (options, property) in [
            (json!(["--platform", "linux amd64"]), "build.options[0]"),
            (json!(["--network=host"]), "build.options[0]"),
            (
                json!(["--target", "t", "--secret", "id=x"]),
                "build.options[2]",
            ),
            (json!(["--build-arg"]), "build.options[0]"),
            (json!(["--build-arg", "NOVALUE"]), "build.options[0]"),
            (json!(["--label", "dev.yolo.id=x"]), "build.options[0]"),
        ] {
            let config = json!({"build": {"dockerfile": "Dockerfile", "options": options}});
            assert_eq!(config_err(case(config).run()).0, property, "{options}");
        }
    }
}
