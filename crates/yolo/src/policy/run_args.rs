//! `runArgs`: the `docker run` options a repository adds. Parsed the way `docker run` does, then
//! each option goes to the concern that judges it (mounts, security, namespaces, limits, ports,
//! labels). An option yolo does not know is refused: it is an option yolo cannot judge.

use super::limits::{check_cpus_text, check_memory, check_pids_text};
use super::mounts::{parse_mount_string, parse_volume_arg, MountRequest};
use super::ports::parse_app_port;
use super::Eval;
use crate::error::Result;
use crate::run_spec::{MountKind, RunSpec};
use std::fmt;

/// How a `docker run` option takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    Value,
    /// A boolean switch; `--flag=false` is accepted.
    Switch,
}

struct RunFlag {
    /// Long names; the first is the canonical one.
    names: &'static [&'static str],
    short: Option<char>,
    arity: Arity,
}

const fn flag(names: &'static [&'static str], short: Option<char>, arity: Arity) -> RunFlag {
    RunFlag {
        names,
        short,
        arity,
    }
}

/// Every `docker run` option yolo understands. Anything else is refused: an option yolo does not
/// know is an option it cannot judge.
const RUN_FLAGS: &[RunFlag] = &[
    flag(&["env"], Some('e'), Arity::Value),
    flag(&["label"], Some('l'), Arity::Value),
    flag(&["memory"], Some('m'), Arity::Value),
    flag(&["cpus"], None, Arity::Value),
    flag(&["pids-limit"], None, Arity::Value),
    flag(&["hostname"], Some('h'), Arity::Value),
    flag(&["add-host"], None, Arity::Value),
    flag(&["shm-size"], None, Arity::Value),
    flag(&["init"], None, Arity::Switch),
    // `-it`, copied from a `docker run` line: yolo makes the container's terminals itself (the
    // agent's and the hooks' come through exec), so these change nothing and are accepted.
    flag(&["interactive"], Some('i'), Arity::Switch),
    flag(&["tty"], Some('t'), Arity::Switch),
    flag(&["user"], Some('u'), Arity::Value),
    flag(&["workdir"], Some('w'), Arity::Value),
    flag(&["publish"], Some('p'), Arity::Value),
    flag(&["tmpfs"], None, Arity::Value),
    flag(&["cap-drop"], None, Arity::Value),
    flag(&["rm"], None, Arity::Switch),
    flag(&["privileged"], None, Arity::Switch),
    flag(&["cap-add"], None, Arity::Value),
    flag(&["security-opt"], None, Arity::Value),
    flag(&["network", "net"], None, Arity::Value),
    flag(&["pid"], None, Arity::Value),
    flag(&["ipc"], None, Arity::Value),
    flag(&["uts"], None, Arity::Value),
    flag(&["userns"], None, Arity::Value),
    flag(&["volume"], Some('v'), Arity::Value),
    flag(&["mount"], None, Arity::Value),
    flag(&["device"], None, Arity::Value),
    flag(&["name"], None, Arity::Value),
    flag(&["ulimit"], None, Arity::Value),
    flag(&["sysctl"], None, Arity::Value),
    flag(&["platform"], None, Arity::Value),
    flag(&["env-file"], None, Arity::Value),
    flag(&["gpus"], None, Arity::Value),
    flag(&["runtime"], None, Arity::Value),
];

/// One parsed `runArgs` option: its index in `runArgs`, canonical long name, and value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RunArg {
    index: usize,
    flag: &'static str,
    /// The value; for switches `None` means on, `Some("false")` off.
    value: Option<String>,
}

/// Why `runArgs` cannot be read as `docker run` options; each names the offending entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RunArgsError {
    /// An option not in `RUN_FLAGS` (or a switch with letters after it).
    Unknown {
        index: usize,
        text: String,
    },
    NotAnOption {
        index: usize,
        text: String,
    },
    NeedsValue {
        index: usize,
        flag: &'static str,
    },
}

impl RunArgsError {
    /// The offending entry's index in `runArgs`.
    fn index(&self) -> usize {
        match self {
            RunArgsError::Unknown { index, .. }
            | RunArgsError::NotAnOption { index, .. }
            | RunArgsError::NeedsValue { index, .. } => *index,
        }
    }
}

impl fmt::Display for RunArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunArgsError::Unknown { text, .. } => write!(
                f,
                "yolo does not accept the docker run option \"{text}\"; it accepts only: {}. No grant can allow other options",
                accepted_run_flags()
            ),
            RunArgsError::NotAnOption { text, .. } => write!(
                f,
                "\"{text}\" is not an option: runArgs holds docker run options only"
            ),
            RunArgsError::NeedsValue { flag, .. } => write!(f, "--{flag} needs a value"),
        }
    }
}

impl std::error::Error for RunArgsError {}

/// Why one option's value is not usable (limits, ports and mounts have their own errors).
#[derive(Debug, Clone, PartialEq, Eq)]
enum ValueError {
    NotASwitch { value: String },
    Hostname { text: String },
    AddHost { text: String },
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::NotASwitch { value } => {
                write!(f, "expected true or false, got \"{value}\"")
            }
            ValueError::Hostname { text } => write!(f, "\"{text}\" is not a valid hostname"),
            ValueError::AddHost { text } => write!(f, "--add-host \"{text}\" needs NAME:IP"),
        }
    }
}

impl std::error::Error for ValueError {}

fn accepted_run_flags() -> String {
    RUN_FLAGS
        .iter()
        .map(|f| match f.short {
            Some(s) => format!("--{} (-{s})", f.names[0]),
            None => format!("--{}", f.names[0]),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parse `runArgs` the way `docker run` does: `--flag=value`, `--flag value`, `-e X`, `-eX`,
/// and short switches grouped (`-it`).
fn parse_run_args(args: &[String]) -> Result<Vec<RunArg>, RunArgsError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let index = i;
        if let Some(switches) = grouped_switches(&args[i]) {
            out.extend(switches.into_iter().map(|flag| RunArg {
                index,
                flag,
                value: None,
            }));
            i += 1;
            continue;
        }
        let (spec, inline) = split_run_flag(index, &args[i])?;
        let value = match (spec.arity, inline) {
            (Arity::Switch, v) => v,
            (Arity::Value, Some(v)) => Some(v),
            (Arity::Value, None) => {
                let next = args.get(i + 1).ok_or(RunArgsError::NeedsValue {
                    index,
                    flag: spec.names[0],
                })?;
                i += 1;
                Some(next.clone())
            }
        };
        out.push(RunArg {
            index,
            flag: spec.names[0],
            value,
        });
        i += 1;
    }
    Ok(out)
}

/// The `-v` and `--mount` requests of `args`, for `mounts::bind_sources` (nothing when they do
/// not parse: the policy says why).
pub(super) fn mount_requests(args: &[String]) -> Vec<MountRequest> {
    parse_run_args(args)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|arg| match (arg.flag, arg.value.as_deref()) {
            ("volume", Some(v)) => parse_volume_arg(v).ok(),
            ("mount", Some(v)) => parse_mount_string(v).ok(),
            _ => None,
        })
        .collect()
}

/// `-it`: two or more short switches in one word, each a known one; their long names.
fn grouped_switches(text: &str) -> Option<Vec<&'static str>> {
    let letters = text.strip_prefix('-').filter(|s| !s.starts_with('-'))?;
    if letters.chars().count() < 2 {
        return None;
    }
    letters
        .chars()
        .map(|c| {
            RUN_FLAGS
                .iter()
                .find(|f| f.short == Some(c) && f.arity == Arity::Switch)
                .map(|f| f.names[0])
        })
        .collect()
}

fn split_run_flag(
    index: usize,
    text: &str,
) -> Result<(&'static RunFlag, Option<String>), RunArgsError> {
    let unknown = || RunArgsError::Unknown {
        index,
        text: text.into(),
    };
    if let Some(long) = text.strip_prefix("--") {
        let (name, value) = match long.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (long, None),
        };
        let spec = RUN_FLAGS
            .iter()
            .find(|f| f.names.contains(&name))
            .ok_or_else(unknown)?;
        return Ok((spec, value));
    }
    let Some(short) = text.strip_prefix('-').filter(|s| !s.is_empty()) else {
        return Err(RunArgsError::NotAnOption {
            index,
            text: text.into(),
        });
    };
    let mut chars = short.chars();
    let letter = chars.next();
    let spec = RUN_FLAGS
        .iter()
        .find(|f| f.short.is_some() && f.short == letter)
        .ok_or_else(unknown)?;
    let tail = chars.as_str();
    match (spec.arity, tail) {
        (_, "") => Ok((spec, None)),
        (Arity::Value, tail) => Ok((
            spec,
            Some(tail.strip_prefix('=').unwrap_or(tail).to_string()),
        )),
        (Arity::Switch, _) => Err(unknown()),
    }
}

impl Eval<'_> {
    pub(super) fn apply_run_args(&mut self, spec: &mut RunSpec) -> Result<()> {
        let args = parse_run_args(&self.config.run_args)
            .map_err(|e| self.config_error(&format!("runArgs[{}]", e.index()), e))?;
        for arg in args {
            let property = format!("runArgs[{}]", arg.index);
            self.apply_run_arg(spec, &property, arg.flag, arg.value)?;
        }
        Ok(())
    }

    fn apply_run_arg(
        &mut self,
        spec: &mut RunSpec,
        property: &str,
        flag: &str,
        value: Option<String>,
    ) -> Result<()> {
        let text = value.clone().unwrap_or_default();
        if self.apply_run_extra(spec, property, flag, &text)? {
            return Ok(());
        }
        let error = |e: &dyn std::error::Error| self.config_error(property, e);
        match flag {
            "env" => {
                let Some((k, v)) = text.split_once('=') else {
                    let name = text.trim();
                    let why = format!("-e {name} would copy the host's {name} into the container");
                    if self.declines() {
                        // The container starts without it, as with the host's variable unset.
                        let reason = format!("{why}, which may hold a secret; set it in \"containerEnv\" or give it a value (-e {name}=VALUE)");
                        self.decline(property, &format!("-e {name}"), &reason, None);
                        return Ok(());
                    }
                    return Err(self.config_error(property, format!("{why}; give it a value (NAME=VALUE)")));
                };
                if k.is_empty() {
                    return Err(
                        self.config_error(property, format!("-e \"{text}\" has no variable name"))
                    );
                }
                spec.container_env.insert(k.into(), v.into());
            }
            "label" => {
                let (k, v) = text.split_once('=').unwrap_or((text.as_str(), ""));
                self.check_label_key(property, k)?;
                spec.labels.insert(k.into(), v.into());
            }
            "memory" => self.run_limits.memory = Some(check_memory(&text).map_err(|e| error(&e))?),
            "cpus" => self.run_limits.cpus = Some(check_cpus_text(&text).map_err(|e| error(&e))?),
            "pids-limit" => {
                self.run_limits.pids = Some(check_pids_text(&text).map_err(|e| error(&e))?)
            }
            "shm-size" => spec.shm_size = Some(check_memory(&text).map_err(|e| error(&e))?),
            "hostname" => spec.hostname = Some(check_hostname(&text).map_err(|e| error(&e))?),
            "add-host" => spec
                .extra_hosts
                .push(check_add_host(&text).map_err(|e| error(&e))?),
            "user" if !text.is_empty() => spec.container_user = Some(text),
            "publish" => {
                let port = parse_app_port(&text).map_err(|e| error(&e))?;
                self.run_ports.push((property.to_string(), port));
            }
            "tmpfs" => {
                let target = text.split(':').next().unwrap_or_default().to_string();
                let req = MountRequest {
                    kind: MountKind::Tmpfs,
                    source: String::new(),
                    target,
                    read_only: false,
                };
                self.add_mount(spec, property, req)?;
            }
            "volume" => {
                let req = parse_volume_arg(&text).map_err(|e| error(&e))?;
                self.add_mount(spec, property, req)?;
            }
            "mount" => {
                let req = parse_mount_string(&text).map_err(|e| error(&e))?;
                self.add_mount(spec, property, req)?;
            }
            "privileged" if switch_on(value.as_deref()).map_err(|e| error(&e))? => {
                self.grant_privileged(spec, property)?
            }
            "cap-add" => self.grant_cap(spec, property, &text)?,
            "security-opt" => self.grant_security_opt(spec, property, &text)?,
            "device" => self.grant_device(spec, property, &text)?,
            "gpus" => {
                let gpus = super::security::parse_gpus_arg(&text).ok_or_else(|| {
                    self.config_error(property, format!(
                        "--gpus \"{text}\": expected all, a count, device=ID[,ID] or count=N"
                    ))
                })?;
                self.grant_gpus(spec, property, &format!("--gpus {}", text.trim()), gpus)?
            }
            // NVIDIA's runtime is how older setups ask for the GPUs; any other runtime would
            // run the container outside the engine's usual isolation, which yolo cannot judge.
            "runtime" if text.trim() == "nvidia" => {
                self.grant_gpus(spec, property, "--runtime=nvidia", crate::run_spec::Gpus::All)?
            }
            "runtime" => {
                return Err(self.config_error(property, format!(
                    "--runtime {}: yolo runs the container with the engine's default runtime; only --runtime=nvidia (GPUs, with --grant gpu) is accepted",
                    text.trim()
                )))
            }
            "network" | "pid" | "ipc" | "uts" | "userns" => {
                self.grant_namespace(spec, property, flag, &text)?
            }
            "init" | "rm" | "interactive" | "tty" => {
                switch_on(value.as_deref()).map_err(|e| error(&e))?;
            }
            // Accepted, no effect: see the module docs of `policy`.
            _ => {}
        }
        Ok(())
    }
}

/// A switch's inline value: none or `true` is on, `false` is off.
fn switch_on(value: Option<&str>) -> Result<bool, ValueError> {
    match value {
        None | Some("true") | Some("1") => Ok(true),
        Some("false") | Some("0") => Ok(false),
        Some(other) => Err(ValueError::NotASwitch {
            value: other.into(),
        }),
    }
}

fn check_hostname(text: &str) -> Result<String, ValueError> {
    let ok = !text.is_empty()
        && text.len() <= 63
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if ok {
        Ok(text.into())
    } else {
        Err(ValueError::Hostname { text: text.into() })
    }
}

/// `name:ip` (or docker's newer `name=ip`), returned as `name:ip`.
fn check_add_host(text: &str) -> Result<String, ValueError> {
    let bad = || ValueError::AddHost { text: text.into() };
    let (name, ip) = text
        .split_once('=')
        .or_else(|| text.split_once(':'))
        .ok_or_else(bad)?;
    if name.is_empty() || ip.is_empty() {
        return Err(bad());
    }
    Ok(format!("{name}:{ip}"))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use crate::run_spec::PortPublish;

    #[test]
    fn run_args_parse_forms() {
        let args: Vec<String> = [
            "--env=A=B",
            "-e",
            "C=D",
            "-eE=F",
            "--memory",
            "2g",
            "-m=1g",
            "--init",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let parsed = parse_run_args(&args).unwrap();
        let flat: Vec<(usize, &str, Option<&str>)> = parsed
            .iter()
            .map(|a| (a.index, a.flag, a.value.as_deref()))
            .collect();
        assert_eq!(
            flat,
            [
                (0, "env", Some("A=B")),
                (1, "env", Some("C=D")),
                (3, "env", Some("E=F")),
                (4, "memory", Some("2g")),
                (6, "memory", Some("1g")),
                (7, "init", None),
            ]
        );
        assert_eq!(
            parse_run_args(&["--net=host".into()]).unwrap()[0].flag,
            "network"
        );
        assert_eq!(parse_run_args(&["-e".into()]).unwrap_err().index(), 0);
        // `-it` from a `docker run` line: two switches, accepted and without effect.
        let it: Vec<_> = parse_run_args(&["-it".into(), "--tty=false".into()])
            .unwrap()
            .into_iter()
            .map(|a| (a.index, a.flag, a.value))
            .collect();
        assert_eq!(
            it,
            [
                (0, "interactive", None),
                (0, "tty", None),
                (1, "tty", Some("false".into()))
            ]
        );
        assert!(parse_run_args(&["-ix".into()]).is_err());
        assert!(parse_run_args(&["-ie".into()]).is_err());
    }

    #[test]
    fn safe_run_args_are_applied() {
        let spec = run_args(&[
            "--env=A=B",
            "-e",
            "C=D=E",
            "--label",
            "team=web",
            "-l",
            "flag",
            "--hostname",
            "box",
            "--add-host",
            "db:10.0.0.2",
            "--shm-size",
            "1g",
            "--user",
            "bob",
            "-w",
            "/x",
            "--init",
            "-v",
            "cache:/cache",
            "--tmpfs",
            "/tmp:size=64m",
            "--mount",
            "type=volume,src=v,dst=/v",
            "--cap-drop",
            "ALL",
            "--rm",
            "--ipc=private",
            "-p",
            "8080:80",
            "--security-opt",
            "no-new-privileges",
        ])
        .run()
        .unwrap();
        assert_eq!(spec.container_env["A"], "B");
        assert_eq!(spec.container_env["C"], "D=E");
        assert_eq!(spec.labels["team"], "web");
        assert_eq!(spec.labels["flag"], "");
        assert_eq!(spec.hostname.as_deref(), Some("box"));
        assert_eq!(spec.extra_hosts, ["db:10.0.0.2"]);
        assert_eq!(spec.shm_size, Some(1 << 30));
        assert_eq!(spec.container_user.as_deref(), Some("bob"));
        let targets: Vec<&str> = spec.mounts.iter().map(|m| m.target.as_str()).collect();
        assert_eq!(targets, ["/home/node/.claude", "/cache", "/tmp", "/v"]);
        assert_eq!(
            spec.ports,
            [PortPublish {
                host: 8080,
                container: 80
            }]
        );
        assert!(spec.grants_used.is_empty() && spec.host_modes.is_empty());
    }

    #[test]
    fn dangerous_run_args_are_refused_with_their_index() {
        let cases: &[(&[&str], &str, &str)] = &[
            (&["--init", "--privileged"], "runArgs[1]", "privileged"),
            (
                &["--cap-add", "sys_admin"],
                "runArgs[0]",
                "cap-add=SYS_ADMIN",
            ),
            (&["--cap-add=SYS_ADMIN"], "runArgs[0]", "cap-add=SYS_ADMIN"),
            (
                &["--security-opt", "apparmor=unconfined"],
                "runArgs[0]",
                "security-opt=apparmor=unconfined",
            ),
            (
                &["--security-opt=label=disable"],
                "runArgs[0]",
                "security-opt=label=disable",
            ),
            (&["--pid=host"], "runArgs[0]", "host-pid"),
            (&["--ipc", "host"], "runArgs[0]", "host-ipc"),
            (&["--uts=host"], "runArgs[0]", "host-uts"),
            (&["--userns=host"], "runArgs[0]", "host-userns"),
            (
                &["-e", "A=1", "-v", "/etc:/etc"],
                "runArgs[2]",
                "host-mount=/etc",
            ),
            (
                &["--mount", "type=bind,source=/srv,target=/srv"],
                "runArgs[0]",
                "host-mount=/srv",
            ),
            (&["--device", "/dev/kvm"], "runArgs[0]", "device"),
            (&["--gpus", "all"], "runArgs[0]", "gpu"),
            (&["--runtime=nvidia"], "runArgs[0]", "gpu"),
        ];
        let bare = run_args(&[]).run().unwrap();
        for (args, property, grant_name) in cases {
            // Refused under `requests = "refuse"`...
            let (p, value, grant) = refused(run_args(args).refusing().run());
            assert_eq!(&p, property, "{args:?}");
            assert!(!value.is_empty());
            assert_grant_text(&grant, grant_name);
            // ...declined by default: named with its grant, and nothing of it in the spec.
            let spec = run_args(args).run().unwrap();
            assert_eq!(
                declined(&spec),
                [(p.clone(), value.clone(), Some(grant_name.to_string()))],
                "{args:?}"
            );
            assert_eq!(
                (
                    spec.privileged,
                    &spec.cap_add,
                    &spec.security_opt,
                    &spec.host_modes,
                    &spec.mounts,
                    &spec.devices,
                    &spec.gpus
                ),
                (
                    bare.privileged,
                    &bare.cap_add,
                    &bare.security_opt,
                    &bare.host_modes,
                    &bare.mounts,
                    &bare.devices,
                    &bare.gpus
                ),
                "{args:?}: a declined request reached the spec"
            );
            let granted = run_args(args).grant(&[grant_name]).run().unwrap();
            assert!(granted.declined.is_empty(), "{args:?}");
            assert_ne!(granted.config_hash, spec.config_hash, "{args:?}");
        }
    }

    #[test]
    fn granted_run_args_land_in_the_spec() {
        let spec = run_args(&[
            "--privileged",
            "--pid",
            "host",
            "--device",
            "/dev/kvm",
            "--cap-add",
            "NET_ADMIN",
        ])
        .grant(&["privileged", "host-pid", "device", "cap-add"])
        .run()
        .unwrap();
        assert!(spec.privileged);
        assert_eq!(spec.host_modes["pid"], "host");
        assert_eq!(spec.devices, ["/dev/kvm"]);
        assert_eq!(spec.cap_add, ["NET_ADMIN"]);
        assert_eq!(
            spec.grants_used,
            ["privileged", "host-pid", "device", "cap-add"]
        );
        assert!(!run_args(&["--privileged=false"]).run().unwrap().privileged);
    }

    #[test]
    fn forbidden_run_args_are_config_errors() {
        let cases: &[(&[&str], &str, &str)] = &[
            (&["--foo"], "runArgs[0]", "--env (-e)"),
            (
                &["-e", "A=1", "--oom-kill-disable"],
                "runArgs[2]",
                "No grant",
            ),
            (&["--gpus", "many"], "runArgs[0]", "a count"),
            (&["--runtime", "runsc"], "runArgs[0]", "default runtime"),
            (
                &["--network", "mynet"],
                "runArgs[0]",
                "manages the container's network",
            ),
            (&["--ulimit", "rtprio=99"], "runArgs[0]", "priority"),
            (&["--label", "dev.yolo.id=evil"], "runArgs[0]", "reserved"),
            (
                &["-l", "devcontainer.local_folder=/"],
                "runArgs[0]",
                "reserved",
            ),
            (&["bash"], "runArgs[0]", "not an option"),
            (&["--memory"], "runArgs[0]", "needs a value"),
            (&["--memory", "lots"], "runArgs[0]", "not a size"),
            (&["--cpus", "0"], "runArgs[0]", "CPU count"),
            (&["--pids-limit", "-1"], "runArgs[0]", "process limit"),
            (&["--hostname", "a b"], "runArgs[0]", "hostname"),
            (&["--add-host", "nohost"], "runArgs[0]", "NAME:IP"),
            (&["-p", "10.0.0.1:80:80"], "runArgs[0]", "127.0.0.1"),
        ];
        for (args, property, needle) in cases {
            let (p, message) = config_err(run_args(args).grant(&["privileged", "host-pid"]).run());
            assert_eq!(&p, property, "{args:?}");
            assert!(message.contains(needle), "{args:?}: {message}");
        }
    }

    /// Requests no grant can honour and the container starts without: a bare `-e NAME` (the
    /// host's variable, maybe a secret) and another engine's namespace mode (Podman's
    /// `--userns=keep-id`). Declined by default with no grant named; config errors under
    /// `requests = "refuse"`.
    #[test]
    fn a_host_variable_copy_and_another_engines_namespace_mode_are_declined() {
        let cases: &[(&[&str], &str, &str)] = &[
            (&["-e", "AWS_SECRET"], "-e AWS_SECRET", "copy the host's"),
            // One space between the flag and the name, however it was written.
            (
                &["-e AWS_SECRET"],
                "-e AWS_SECRET",
                "-e AWS_SECRET would copy the host's AWS_SECRET into",
            ),
            (&["--userns=keep-id"], "--userns=keep-id", "\"host\""),
            (&["--pid", "weird"], "--pid=weird", "\"host\""),
        ];
        let bare = run_args(&[]).run().unwrap();
        for (args, value, needle) in cases {
            let spec = run_args(args).run().unwrap();
            assert_eq!(
                declined(&spec),
                [("runArgs[0]".to_string(), value.to_string(), None)],
                "{args:?}"
            );
            assert!(
                spec.declined[0].reason.contains(needle),
                "{args:?}: {}",
                spec.declined[0].reason
            );
            assert_eq!(
                (&spec.container_env, &spec.host_modes),
                (&bare.container_env, &bare.host_modes),
                "{args:?}: a declined request reached the spec"
            );
            let (p, message) = config_err(run_args(args).refusing().run());
            assert_eq!(p, "runArgs[0]", "{args:?}");
            assert!(message.contains(needle), "{args:?}: {message}");
        }
    }
}
