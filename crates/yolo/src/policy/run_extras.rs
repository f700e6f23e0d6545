//! The `runArgs` the corpus uses beyond yolo's first set: `--ulimit`, `--sysctl`,
//! `--platform`, `--env-file` (a repository file; `crate::env_file` reads it after the policy)
//! and `--name` (ignored with a note: yolo names its containers).
//!
//! Limits kept on them, and why:
//! - `--ulimit`: `nofile` up to 1048576 (the kernel's default `nr_open`; above it the start
//!   fails anyway); `rtprio`, `rttime` and `nice` refused: they let an unprivileged process
//!   take real-time or raised priority, which the dropped `CAP_SYS_NICE` otherwise forbids.
//! - `--sysctl`: only the IPC-namespaced ones (`kernel.shm*`, `kernel.msg*`, `kernel.sem`,
//!   `fs.mqueue.*`), which change nothing outside the container. `net.*` is refused: the agent
//!   shares its firewall guard's network namespace, so they would retune the guard's network.

use super::Eval;
use crate::error::{Error, Result};
use crate::paths::normalize_path;
use crate::run_spec::{RunSpec, Ulimit};

const ULIMITS: &[&str] = &[
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nofile",
    "nproc",
    "rss",
    "sigpending",
    "stack",
];
const PRIORITY_ULIMITS: &[&str] = &["rtprio", "rttime", "nice"];
const MAX_NOFILE: i64 = 1 << 20;

/// `name=soft[:hard]`; `-1` or `unlimited` for no limit.
fn parse_ulimit(text: &str) -> std::result::Result<Ulimit, String> {
    let (name, values) = text
        .split_once('=')
        .ok_or_else(|| format!("--ulimit \"{text}\" needs NAME=SOFT[:HARD]"))?;
    if PRIORITY_ULIMITS.contains(&name) {
        return Err(format!(
            "--ulimit {name} would let the agent raise its scheduling priority above other programs'; yolo refuses it (no grant)"
        ));
    }
    if !ULIMITS.contains(&name) {
        return Err(format!(
            "--ulimit \"{name}\" is not a limit; known: {}",
            ULIMITS.join(", ")
        ));
    }
    let number =
        |v: &str| match v {
            "unlimited" | "-1" => Ok(-1),
            v => v.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                format!("--ulimit {name}: \"{v}\" is not a number (or -1, unlimited)")
            }),
        };
    let (soft, hard) = match values.split_once(':') {
        Some((s, h)) => (number(s)?, number(h)?),
        None => (number(values)?, number(values)?),
    };
    // -1 is unlimited: above any number.
    if hard != -1 && (soft == -1 || soft > hard) {
        return Err(format!(
            "--ulimit {name}: the soft limit is above the hard one"
        ));
    }
    if name == "nofile" && (hard == -1 || hard > MAX_NOFILE) {
        return Err(format!(
            "--ulimit nofile: at most {MAX_NOFILE} open files (the kernel's limit)"
        ));
    }
    Ok(Ulimit {
        name: name.into(),
        soft,
        hard,
    })
}

/// Whether a sysctl lives in the container's IPC namespace.
fn ipc_namespaced(name: &str) -> bool {
    name.starts_with("kernel.shm")
        || name.starts_with("kernel.msg")
        || name == "kernel.sem"
        || name.starts_with("fs.mqueue.")
}

impl Eval<'_> {
    /// One of the options above; false when `flag` is not one of them.
    pub(super) fn apply_run_extra(
        &mut self,
        spec: &mut RunSpec,
        property: &str,
        flag: &str,
        text: &str,
    ) -> Result<bool> {
        match flag {
            "ulimit" => {
                let limit = parse_ulimit(text).map_err(|e| self.config_error(property, e))?;
                spec.ulimits.retain(|u| u.name != limit.name);
                spec.ulimits.push(limit);
            }
            "sysctl" => {
                let (name, value) = text
                    .split_once('=')
                    .ok_or_else(|| self.config_error(property, format!("--sysctl \"{text}\" needs NAME=VALUE")))?;
                if name.starts_with("net.") && self.declines() {
                    let reason = "the container shares its firewall guard's network namespace, so a net.* sysctl would retune the guard's network, which yolo owns; no grant allows it";
                    self.decline(property, &format!("--sysctl {text}"), reason, None);
                    return Ok(true);
                }
                if name.starts_with("net.") {
                    return Err(Error::Forbidden {
                        file: self.input.config_file.to_path_buf(),
                        property: property.into(),
                        value: format!("--sysctl {text}"),
                        reason: "the container shares its firewall guard's network namespace, so a net.* sysctl would retune the guard's network, which yolo owns; no grant allows it".into(),
                    });
                }
                if !ipc_namespaced(name) {
                    return Err(self.config_error(property, format!(
                        "--sysctl {name}: yolo sets only the container's own IPC sysctls (kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*)"
                    )));
                }
                spec.sysctls.insert(name.into(), value.into());
            }
            "platform" => {
                if !valid_platform(text) {
                    return Err(self.config_error(property, format!(
                        "--platform \"{text}\" is not OS/ARCH[/VARIANT], like linux/amd64"
                    )));
                }
                spec.platform = Some(text.into());
            }
            "env-file" => self.env_file(spec, property, text)?,
            "name" => spec.notes.push(format!(
                "{property}: --name {} is ignored: yolo names its containers itself (here \"{}\") so it can find them again",
                crate::visible::escape_controls(text),
                spec.container_name
            )),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `--env-file PATH`, relative to the workspace (where the reference CLI's `docker run`
    /// runs when VS Code starts it); a file outside the repository needs `host-mount`.
    fn env_file(&mut self, spec: &mut RunSpec, property: &str, text: &str) -> Result<()> {
        let joined = self.input.workspace.join(text);
        let path = normalize_path(&joined).unwrap_or(joined);
        let inside = path.starts_with(self.input.workspace)
            || self
                .git_root
                .as_ref()
                .is_some_and(|root| path.starts_with(root));
        if !inside {
            let value = format!(
                "the host file {} as the container's environment",
                path.display()
            );
            let granted = self.allow(
                super::grants::Need::HostMount(path.clone()),
                property,
                &value,
                "yolo reads only repository files into the container, to keep other host files out of the agent's reach",
            )?;
            if !granted {
                return Ok(());
            }
        }
        spec.env_files.push((property.to_string(), path));
        Ok(())
    }
}

/// `OS/ARCH[/VARIANT]`, like `linux/amd64` or `linux/arm64/v8`.
pub(super) fn valid_platform(text: &str) -> bool {
    !text.is_empty()
        && text.split('/').count() <= 3
        && text.split('/').all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::run_args as case;
    use super::*;

    fn run_args(args: &[&str]) -> RunSpec {
        case(args).run().unwrap()
    }

    fn run_args_err(args: &[&str]) -> String {
        case(args).refusing().run().unwrap_err().to_string()
    }

    #[test]
    fn ulimits_are_parsed_and_capped() {
        assert_eq!(
            parse_ulimit("nofile=1024:65536").unwrap(),
            Ulimit {
                name: "nofile".into(),
                soft: 1024,
                hard: 65536
            }
        );
        assert_eq!(parse_ulimit("core=-1").unwrap().hard, -1);
        assert_eq!(
            parse_ulimit("memlock=unlimited:unlimited").unwrap().soft,
            -1
        );
        assert!(parse_ulimit("nofile=2000000")
            .unwrap_err()
            .contains("at most"));
        assert!(parse_ulimit("nofile=10:5")
            .unwrap_err()
            .contains("above the hard"));
        assert!(parse_ulimit("rtprio=99").unwrap_err().contains("priority"));
        assert!(parse_ulimit("bogus=1").unwrap_err().contains("not a limit"));
        assert!(parse_ulimit("nofile").is_err());
    }

    #[test]
    fn ipc_sysctls_are_applied_and_net_ones_refused_naming_the_guard() {
        let spec = run_args(&[
            "--sysctl",
            "kernel.shmmax=1073741824",
            "--sysctl=fs.mqueue.msg_max=64",
        ]);
        assert_eq!(spec.sysctls["kernel.shmmax"], "1073741824");
        assert_eq!(spec.sysctls["fs.mqueue.msg_max"], "64");
        let message = run_args_err(&["--sysctl", "net.ipv4.ip_forward=1"]);
        assert!(
            message.contains("firewall guard's network namespace"),
            "{message}"
        );
        let message = run_args_err(&["--sysctl", "vm.swappiness=1"]);
        assert!(message.contains("IPC sysctls"), "{message}");
    }

    #[test]
    fn name_is_a_note_and_platform_is_kept() {
        let spec = run_args(&["--name", "mine", "--platform=linux/amd64"]);
        assert_eq!(spec.platform.as_deref(), Some("linux/amd64"));
        assert_eq!(spec.notes.len(), 1);
        assert!(
            spec.notes[0].contains("--name mine is ignored"),
            "{:?}",
            spec.notes
        );
        assert!(run_args_err(&["--platform", "linux amd64"]).contains("OS/ARCH"));
    }

    #[test]
    fn an_env_file_is_resolved_in_the_workspace_and_outside_needs_host_mount() {
        let spec = run_args(&["--env-file", ".devcontainer/dev.env"]);
        let (property, path) = &spec.env_files[0];
        assert_eq!(property, "runArgs[0]");
        assert!(path.ends_with(".devcontainer/dev.env"), "{path:?}");
        let message = run_args_err(&["--env-file", "/etc/secrets.env"]);
        assert!(message.contains("host-mount=/etc/secrets.env"), "{message}");
        let message = run_args_err(&["--env-file", "../other/.env"]);
        assert!(message.contains("host-mount"), "{message}");
    }
}
