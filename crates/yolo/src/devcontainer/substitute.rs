//! Variable substitution per the devcontainer spec.
//!
//! Behaviour follows the reference CLI (`src/spec-common/variableSubstitution.ts`) so the same
//! devcontainer.json means the same thing in VS Code and in yolo:
//! - a variable is `${` up to the first `}` on the same line; its name is the text before the
//!   first `:`, the rest are arguments;
//! - every string value is substituted, in objects and arrays at any depth; object keys are not;
//! - unknown variables are left as written, so later stages (`${containerEnv:..}`) or the
//!   container's shell see them unchanged;
//! - `${devcontainerId}` is replaced in a second pass, as the reference does, after the host
//!   variables.
//!
//! One deliberate difference: in `${localEnv:VAR:default}` the default is everything after the
//! second `:` (`${localEnv:X:a:b}` gives `a:b`); the reference keeps only `a`, which silently
//! truncates defaults such as URLs or `host:port`.
use super::model::DevContainer;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

pub(crate) struct Context<'a> {
    pub(crate) local_workspace_folder: &'a str,
    pub(crate) container_workspace_folder: &'a str,
    pub(crate) devcontainer_id: &'a str,
    /// Host environment lookup (`${localEnv:..}`); injected so tests need not touch the process env.
    pub(crate) local_env: &'a dyn Fn(&str) -> Option<String>,
}

/// Substitute every `${...}` the spec defines for the host side in every string of the config
/// (or of an image metadata entry, which the reference substitutes the same way).
/// `${containerEnv:VAR}` is left in place (resolved later by `container_env`).
pub(crate) fn substitute<T>(config: &T, ctx: &Context) -> T
where
    T: Serialize + DeserializeOwned + Clone,
{
    // Walking the JSON form reaches every string, including ones in fields added to the model
    // later, without a hand-written walk per field.
    let Ok(mut value) = serde_json::to_value(config) else {
        return config.clone();
    };
    // The reference resolves host variables inside the container folder itself first
    // (e.g. `/workspaces/${localWorkspaceFolderBasename}`).
    let container_folder = replace_variables(ctx.container_workspace_folder, |name, args| {
        host_variable(ctx, ctx.container_workspace_folder, name, args)
    });
    walk_strings(&mut value, &|s| {
        let s = replace_variables(s, |name, args| {
            host_variable(ctx, &container_folder, name, args)
        });
        replace_variables(&s, |name, _| {
            (name == "devcontainerId").then(|| ctx.devcontainer_id.to_string())
        })
    });
    // Only string contents changed, and every string in the model deserializes from any string,
    // so this cannot fail; if it ever did, the unsubstituted config is the safe answer (literal
    // `${...}` text grants nothing).
    serde_json::from_value(value).unwrap_or_else(|_| config.clone())
}

/// The host environment variables the config reads through `${localEnv:VAR}` (or `${env:VAR}`),
/// sorted. The repository (and so the agent) writes devcontainer.json, so this is what it asks
/// to copy from the host into the container; policy can show or filter it (the `local_env`
/// lookup in `Context` is the place to withhold a variable).
pub(crate) fn local_env_names(config: &DevContainer) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    if let Ok(value) = serde_json::to_value(config) {
        visit_strings(&value, &mut |s| {
            // Only the matching matters here; the replaced text is thrown away.
            replace_variables(s, |name, args| {
                if let ("localEnv" | "env", Some(args)) = (name, args) {
                    let var = args.split_once(':').map_or(args, |(var, _)| var);
                    names.insert(var.to_string());
                }
                None
            });
        });
    }
    names
}

/// Resolve `${containerEnv:VAR[:default]}` in a remoteEnv value against the container's env.
pub(crate) fn container_env(value: &str, env: &BTreeMap<String, String>) -> String {
    replace_variables(value, |name, args| match name {
        "containerEnv" => lookup(args, |var| env.get(var).cloned()),
        _ => None,
    })
}

/// The value of one host-side variable, or None to leave it as written.
fn host_variable(
    ctx: &Context,
    container_folder: &str,
    name: &str,
    args: Option<&str>,
) -> Option<String> {
    match name {
        // `env` is the legacy spelling the reference still accepts.
        "localEnv" | "env" => lookup(args, ctx.local_env),
        "localWorkspaceFolder" => Some(ctx.local_workspace_folder.to_string()),
        "localWorkspaceFolderBasename" => Some(basename(ctx.local_workspace_folder).to_string()),
        "containerWorkspaceFolder" => Some(container_folder.to_string()),
        "containerWorkspaceFolderBasename" => Some(basename(container_folder).to_string()),
        _ => None,
    }
}

/// `VAR` or `VAR:default` against an environment. A missing variable without a default becomes
/// the empty string, as in a shell and in the reference CLI. Without a variable name at all
/// (`${localEnv}`) the reference fails; we leave the text as written.
fn lookup(args: Option<&str>, env: impl Fn(&str) -> Option<String>) -> Option<String> {
    let args = args?;
    let (var, default) = match args.split_once(':') {
        Some((var, default)) => (var, Some(default)),
        None => (args, None),
    };
    Some(
        env(var)
            .or_else(|| default.map(str::to_string))
            .unwrap_or_default(),
    )
}

/// Replace each `${name[:args]}` for which `resolve` returns a value.
///
/// Matches what the reference's `/\$\{(.*?)\}/g` matches: the shortest run up to `}`, not across a
/// line break (JavaScript's `.`), and scanning resumes after a match, so `${a${b}` is one
/// (unknown) variable named `a${b`.
fn replace_variables(
    s: &str,
    mut resolve: impl FnMut(&str, Option<&str>) -> Option<String>,
) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        let inner_start = start + 2;
        let Some(len) = variable_len(&rest[inner_start..]) else {
            // No `}` on this line: keep the `$` and look for the next `${` after it.
            out.push_str(&rest[..start + 1]);
            rest = &rest[start + 1..];
            continue;
        };
        let inner = &rest[inner_start..inner_start + len];
        let whole = &rest[start..inner_start + len + 1];
        let (name, args) = match inner.split_once(':') {
            Some((name, args)) => (name, Some(args)),
            None => (inner, None),
        };
        out.push_str(&rest[..start]);
        match resolve(name, args) {
            Some(value) => out.push_str(&value),
            None => out.push_str(whole),
        }
        rest = &rest[inner_start + len + 1..];
    }
    out.push_str(rest);
    out
}

/// Length of the variable body before its closing `}`, if it closes before a line terminator.
fn variable_len(s: &str) -> Option<usize> {
    for (i, c) in s.char_indices() {
        match c {
            '}' => return Some(i),
            '\n' | '\r' | '\u{2028}' | '\u{2029}' => return None,
            _ => {}
        }
    }
    None
}

/// `path.posix.basename`: the last component, ignoring trailing slashes (`/a/b/` gives `b`).
fn basename(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    match trimmed.rfind('/') {
        Some(i) => &trimmed[i + 1..],
        None => trimmed,
    }
}

/// Call `f` on every string value (not object keys) at any depth.
fn visit_strings(value: &Value, f: &mut dyn FnMut(&str)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().for_each(|v| visit_strings(v, f)),
        Value::Object(map) => map.values().for_each(|v| visit_strings(v, f)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Apply `f` to every string value (not object keys) at any depth.
fn walk_strings(value: &mut Value, f: &dyn Fn(&str) -> String) {
    match value {
        Value::String(s) => *s = f(s),
        Value::Array(items) => items.iter_mut().for_each(|v| walk_strings(v, f)),
        Value::Object(map) => map.values_mut().for_each(|v| walk_strings(v, f)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devcontainer::model::{LifecycleCommand, MountEntry, PortEntry, SingleCommand};

    const ID: &str = "0ggfpocq9c44jcovvn9pqe9eibq1dnovmm8hihntsideg1i49bcn";

    fn host_env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/dev".into()),
            "EMPTY" => Some(String::new()),
            "TRICKY" => Some("${localWorkspaceFolder}|${devcontainerId}".into()),
            _ => None,
        }
    }

    fn with_ctx<T>(container_folder: &str, f: impl FnOnce(&Context) -> T) -> T {
        let ctx = Context {
            local_workspace_folder: "/home/dev/src/proj",
            container_workspace_folder: container_folder,
            devcontainer_id: ID,
            local_env: &host_env,
        };
        f(&ctx)
    }

    /// Substitute in a single string by way of the `name` property.
    fn sub(text: &str) -> String {
        let config = DevContainer {
            name: Some(text.into()),
            ..Default::default()
        };
        with_ctx("/workspace", |ctx| {
            substitute(&config, ctx).name.unwrap_or_default()
        })
    }

    #[test]
    fn workspace_folder_variables() {
        assert_eq!(sub("${localWorkspaceFolder}"), "/home/dev/src/proj");
        assert_eq!(sub("${localWorkspaceFolderBasename}"), "proj");
        assert_eq!(sub("${containerWorkspaceFolder}"), "/workspace");
        assert_eq!(sub("${containerWorkspaceFolderBasename}"), "workspace");
        assert_eq!(
            sub("src=${localWorkspaceFolder}/x,dst=${containerWorkspaceFolder}/x"),
            "src=/home/dev/src/proj/x,dst=/workspace/x"
        );
    }

    #[test]
    fn devcontainer_id_variable() {
        assert_eq!(sub("vol-${devcontainerId}"), format!("vol-{ID}"));
    }

    #[test]
    fn local_env_lookup_and_defaults() {
        assert_eq!(sub("${localEnv:HOME}"), "/home/dev");
        assert_eq!(sub("${env:HOME}"), "/home/dev");
        assert_eq!(sub("[${localEnv:MISSING}]"), "[]");
        assert_eq!(sub("${localEnv:MISSING:fallback}"), "fallback");
        assert_eq!(sub("${localEnv:X:a:b}"), "a:b");
        assert_eq!(sub("${localEnv:X:http://h:8080/p}"), "http://h:8080/p");
        assert_eq!(sub("${localEnv:HOME:unused}"), "/home/dev");
        // Set but empty is a value, not a reason to use the default.
        assert_eq!(sub("[${localEnv:EMPTY:d}]"), "[]");
        assert_eq!(sub("[${localEnv:MISSING:}]"), "[]");
        assert_eq!(sub("[${localEnv:}]"), "[]");
    }

    #[test]
    fn local_env_without_a_name_is_left_alone() {
        assert_eq!(sub("${localEnv}"), "${localEnv}");
        assert_eq!(sub("${env}"), "${env}");
    }

    #[test]
    fn container_env_and_unknown_variables_are_left_alone() {
        assert_eq!(sub("${containerEnv:PATH}"), "${containerEnv:PATH}");
        assert_eq!(
            sub("${containerEnv:PATH:/bin}"),
            "${containerEnv:PATH:/bin}"
        );
        assert_eq!(
            sub("${unknown} ${foo:bar} ${}"),
            "${unknown} ${foo:bar} ${}"
        );
        // Case matters, as in the reference.
        assert_eq!(sub("${LOCALENV:HOME}"), "${LOCALENV:HOME}");
    }

    #[test]
    fn matching_follows_the_reference_regex() {
        // No closing brace: nothing to replace.
        assert_eq!(sub("${localWorkspaceFolder"), "${localWorkspaceFolder");
        // A variable does not span lines; the next one on the line after still counts.
        assert_eq!(
            sub("${localEnv:HOME\n${localWorkspaceFolderBasename}"),
            "${localEnv:HOME\nproj"
        );
        // The first `}` closes: `${a${b}` is one unknown variable, and the text after it stays.
        assert_eq!(
            sub("${a${localWorkspaceFolderBasename}}"),
            "${a${localWorkspaceFolderBasename}}"
        );
        assert_eq!(sub("${localEnv:MISSING:{x}}"), "{x}");
        assert_eq!(sub("$${localWorkspaceFolderBasename}$"), "$proj$");
        assert_eq!(sub("é${localWorkspaceFolderBasename}ü"), "éprojü");
        assert_eq!(sub("no variables"), "no variables");
    }

    #[test]
    fn host_values_are_not_substituted_again_except_the_id() {
        // One pass for host variables, then one for the id, as in the reference CLI.
        assert_eq!(
            sub("${localEnv:TRICKY}"),
            format!("${{localWorkspaceFolder}}|{ID}")
        );
    }

    #[test]
    fn container_folder_may_use_host_variables() {
        let config = DevContainer {
            name: Some("${containerWorkspaceFolder} ${containerWorkspaceFolderBasename}".into()),
            ..Default::default()
        };
        let name = with_ctx("/workspaces/${localWorkspaceFolderBasename}/", |ctx| {
            substitute(&config, ctx).name
        });
        assert_eq!(name.as_deref(), Some("/workspaces/proj/ proj"));
    }

    #[test]
    fn basename_like_node_posix() {
        assert_eq!(basename("/a/b"), "b");
        assert_eq!(basename("/a/b//"), "b");
        assert_eq!(basename("b"), "b");
        assert_eq!(basename("/"), "");
        assert_eq!(basename(""), "");
    }

    #[test]
    fn every_string_in_the_config_is_substituted_but_not_keys() {
        let raw: DevContainer = serde_json::from_str(
            r#"{
            "name": "${localWorkspaceFolderBasename}",
            "image": "img:${localEnv:TAG:latest}",
            "build": {"dockerfile": "${localEnv:DF:Dockerfile}", "context": "${localWorkspaceFolder}",
                      "args": {"${localEnv:HOME}": "${localEnv:HOME}"}, "target": "${localEnv:T:dev}",
                      "cacheFrom": "c-${devcontainerId}", "options": ["--label=${localEnv:HOME}"]},
            "containerEnv": {"W": "${containerWorkspaceFolder}"},
            "remoteEnv": {"P": "${containerEnv:PATH}:${localEnv:HOME}", "U": null},
            "containerUser": "${localEnv:U:dev}",
            "workspaceFolder": "${containerWorkspaceFolder}",
            "workspaceMount": "source=${localWorkspaceFolder},target=/workspace,type=bind",
            "mounts": ["source=v-${devcontainerId},target=/v,type=volume",
                       {"type": "volume", "source": "s-${devcontainerId}", "target": "${containerWorkspaceFolder}/t"}],
            "runArgs": ["--hostname=${localWorkspaceFolderBasename}"],
            "forwardPorts": [3000, "${localEnv:DB:db:5432}"],
            "postCreateCommand": "echo ${localWorkspaceFolderBasename}",
            "postStartCommand": ["echo", "${localWorkspaceFolderBasename}"],
            "postAttachCommand": {"a": "echo ${devcontainerId}", "b": ["echo", "${localEnv:HOME}"]},
            "customizations": {"yolo": {"firewall": {"allow": ["${localEnv:REG:registry.local}"]},
                                        "agent": "${localEnv:AGENT:claude}"}}
        }"#,
        )
        .expect("test config");
        let out = with_ctx("/workspace", |ctx| substitute(&raw, ctx));

        assert_eq!(out.name.as_deref(), Some("proj"));
        assert_eq!(out.image.as_deref(), Some("img:latest"));
        let build = out.build.expect("build");
        assert_eq!(build.dockerfile.as_deref(), Some("Dockerfile"));
        assert_eq!(build.context.as_deref(), Some("/home/dev/src/proj"));
        assert_eq!(
            build.args.into_iter().collect::<Vec<_>>(),
            vec![("${localEnv:HOME}".to_string(), "/home/dev".to_string())]
        );
        assert_eq!(build.target.as_deref(), Some("dev"));
        assert_eq!(build.cache_from.0, vec![format!("c-{ID}")]);
        assert_eq!(build.options, vec!["--label=/home/dev".to_string()]);
        assert_eq!(
            out.container_env.get("W").map(String::as_str),
            Some("/workspace")
        );
        assert_eq!(
            out.remote_env.get("P"),
            Some(&Some("${containerEnv:PATH}:/home/dev".to_string()))
        );
        assert_eq!(out.remote_env.get("U"), Some(&None));
        assert_eq!(out.container_user.as_deref(), Some("dev"));
        assert_eq!(out.workspace_folder.as_deref(), Some("/workspace"));
        assert_eq!(
            out.workspace_mount.as_deref(),
            Some("source=/home/dev/src/proj,target=/workspace,type=bind")
        );
        assert_eq!(
            out.mounts[0],
            MountEntry::Text(format!("source=v-{ID},target=/v,type=volume"))
        );
        match &out.mounts[1] {
            MountEntry::Object(m) => {
                assert_eq!(m.source.as_deref(), Some(format!("s-{ID}").as_str()));
                assert_eq!(m.target, "/workspace/t");
            }
            other => panic!("expected an object mount, got {other:?}"),
        }
        assert_eq!(out.run_args, vec!["--hostname=proj".to_string()]);
        assert_eq!(
            out.forward_ports,
            vec![PortEntry::Number(3000), PortEntry::Text("db:5432".into())]
        );
        assert_eq!(
            out.post_create_command,
            Some(LifecycleCommand::Shell("echo proj".into()))
        );
        assert_eq!(
            out.post_start_command,
            Some(LifecycleCommand::Args(vec!["echo".into(), "proj".into()]))
        );
        let mut parallel = BTreeMap::new();
        parallel.insert("a".to_string(), SingleCommand::Shell(format!("echo {ID}")));
        parallel.insert(
            "b".to_string(),
            SingleCommand::Args(vec!["echo".into(), "/home/dev".into()]),
        );
        assert_eq!(
            out.post_attach_command,
            Some(LifecycleCommand::Parallel(parallel))
        );
        let yolo = out.customizations.and_then(|c| c.yolo).expect("yolo");
        assert_eq!(yolo.firewall.allow, vec!["registry.local".to_string()]);
        assert_eq!(yolo.agent.as_deref(), Some("claude"));
    }

    #[test]
    fn a_config_without_variables_comes_back_unchanged() {
        let raw: DevContainer = serde_json::from_str(
            r#"{
            "name": "n", "image": "i", "dockerFile": "D", "context": "..",
            "build": {"dockerfile": "D", "args": {"A": "1"}, "cacheFrom": ["a", "b"], "options": ["--pull"]},
            "containerEnv": {"A": "1"}, "remoteEnv": {"B": null, "C": "c"},
            "containerUser": "u", "remoteUser": "r", "updateRemoteUserUID": false,
            "overrideCommand": true, "init": true, "privileged": false,
            "capAdd": ["SYS_PTRACE"], "securityOpt": ["seccomp=x"],
            "workspaceFolder": "/w", "workspaceMount": "m",
            "mounts": ["a", {"type": "volume", "target": "/t"}],
            "runArgs": ["--x"], "forwardPorts": [1, "h:2"], "appPort": ["8080:80", 3000],
            "hostRequirements": {"cpus": 2, "memory": "4gb", "storage": "32gb"},
            "shutdownAction": "none",
            "initializeCommand": "i", "onCreateCommand": ["o"], "updateContentCommand": {"u": "u"},
            "postCreateCommand": "p", "postStartCommand": "s", "postAttachCommand": "a",
            "features": {}, "customizations": {"yolo": {"limits": {"cpus": 1.5, "memory": "1g", "pids": 100},
                "firewall": {"allow": ["a.b"], "presets": ["npm"]}, "agent": "codex"}}
        }"#,
        )
        .expect("test config");
        let out = with_ctx("/workspace", |ctx| substitute(&raw, ctx));
        assert_eq!(out, raw);
    }

    #[test]
    fn local_env_names_lists_what_the_repo_reads_from_the_host() {
        let raw: DevContainer = serde_json::from_str(
            r#"{"image": "x", "containerEnv": {"K": "${localEnv:AWS_SECRET_ACCESS_KEY}"},
                "runArgs": ["-e", "T=${env:GITHUB_TOKEN:none}"],
                "remoteEnv": {"P": "${containerEnv:PATH}", "E": "${localEnv}", "H": "${localEnv:HOME}"},
                "postCreateCommand": {"a": ["echo", "${localEnv:HOME}"]}}"#,
        )
        .expect("test config");
        let names: Vec<String> = local_env_names(&raw).into_iter().collect();
        assert_eq!(names, ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "HOME"]);
    }

    #[test]
    fn container_env_resolves_against_the_container() {
        let env: BTreeMap<String, String> = [("PATH".to_string(), "/usr/bin".to_string())]
            .into_iter()
            .collect();
        assert_eq!(
            container_env("${containerEnv:PATH}:/x", &env),
            "/usr/bin:/x"
        );
        assert_eq!(container_env("[${containerEnv:NOPE}]", &env), "[]");
        assert_eq!(container_env("${containerEnv:NOPE:a:b}", &env), "a:b");
        assert_eq!(
            container_env("${containerEnv:PATH:unused}", &env),
            "/usr/bin"
        );
        assert_eq!(container_env("${containerEnv}", &env), "${containerEnv}");
        assert_eq!(container_env("${localEnv:PATH}", &env), "${localEnv:PATH}");
        assert_eq!(container_env("plain", &env), "plain");
    }
}
