//! CPU, memory and process limits. Every container gets yolo's defaults; the layers that may
//! change them, later ones winning field by field: hostRequirements < customizations.yolo.limits
//! < runArgs < the user's config < flags. The user's config and the flags arrive checked (by
//! `settings`, before anything runs).

use super::{Eval, Flags};
use crate::error::{Error, Result};
use crate::run_spec::{Chooser, Limits};
use std::fmt;
use std::num::{ParseFloatError, ParseIntError};

/// One source of limits; later layers override earlier ones field by field.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct LimitLayer {
    /// Cores.
    pub(crate) cpus: Option<f64>,
    /// Bytes.
    pub(crate) memory: Option<i64>,
    pub(crate) pids: Option<i64>,
}

impl LimitLayer {
    /// Check one source's limits as written; `error` names the source and the field (`cpus`,
    /// `memory`, `pids`).
    pub(crate) fn check(
        cpus: Option<f64>,
        memory: Option<&str>,
        pids: Option<i64>,
        error: impl Fn(&str, LimitError) -> Error,
    ) -> Result<LimitLayer> {
        Ok(LimitLayer {
            cpus: cpus
                .map(check_cpus)
                .transpose()
                .map_err(|e| error("cpus", e))?,
            memory: memory
                .map(check_memory)
                .transpose()
                .map_err(|e| error("memory", e))?,
            pids: pids
                .map(check_pids)
                .transpose()
                .map_err(|e| error("pids", e))?,
        })
    }

    fn apply(&self, limits: &mut Limits) {
        limits.cpus = self.cpus.unwrap_or(limits.cpus);
        limits.memory_bytes = self.memory.unwrap_or(limits.memory_bytes);
        limits.pids = self.pids.unwrap_or(limits.pids);
    }
}

/// Docker refuses less than 6 MiB of memory.
const MIN_MEMORY: i64 = 6 * 1024 * 1024;

/// Why a limit is not usable.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LimitError {
    NotASize {
        text: String,
    },
    TooLittleMemory {
        text: String,
    },
    Cpus {
        cpus: f64,
    },
    CpusText {
        text: String,
        source: ParseFloatError,
    },
    Pids {
        pids: i64,
    },
    PidsText {
        text: String,
        source: ParseIntError,
    },
}

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitError::NotASize { text } => {
                write!(f, "\"{text}\" is not a size like 512m, 4g or 8gb")
            }
            LimitError::TooLittleMemory { text } => {
                write!(f, "\"{text}\" is less than the 6m Docker needs")
            }
            LimitError::Cpus { cpus } => write!(
                f,
                "{cpus} is not a CPU count (a number above 0, like 2 or 0.5)"
            ),
            LimitError::CpusText { text, .. } => write!(f, "\"{text}\" is not a CPU count"),
            LimitError::Pids { pids } => {
                write!(f, "{pids} is not a process limit (a whole number above 0)")
            }
            LimitError::PidsText { text, .. } => write!(f, "\"{text}\" is not a process limit"),
        }
    }
}

impl std::error::Error for LimitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LimitError::CpusText { source, .. } => Some(source),
            LimitError::PidsText { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The CPUs a container gets on an engine with `host_cpus` cores, and why it is fewer than asked
/// (None when it is not). Docker refuses more CPUs than the engine has; beyond that, what yolo
/// and the repository choose leaves one core to the host (half a core on a one-core engine) so a
/// busy agent cannot make the machine unusable; only the user may take every core.
pub(crate) fn fit_cpus(cpus: f64, chosen_by: Chooser, host_cpus: i64) -> (f64, Option<String>) {
    let host = host_cpus.max(1) as f64;
    let cap = match chosen_by {
        Chooser::User => host,
        _ => (host - 1.0).max(0.5),
    };
    if cpus <= cap {
        return (cpus, None);
    }
    let why = match chosen_by {
        Chooser::User => format!(
            "you asked for {cpus} CPUs and the engine has {host_cpus}: the container gets {cap}"
        ),
        Chooser::Repository => format!(
            "the repository asks for {cpus} CPUs; yolo leaves one of the engine's {host_cpus} cores to the host, so the container gets {cap} (set [limits] cpus or --cpus to give more)"
        ),
        Chooser::Default => return (cap, None),
    };
    (cap, Some(why))
}

/// A writable-layer size: at least 64 MiB (less cannot hold a package install).
pub(crate) fn check_disk(text: &str) -> Result<i64, String> {
    match parse_size(text) {
        Some(bytes) if bytes >= 64 << 20 => Ok(bytes),
        Some(_) => Err(format!("\"{text}\" is less than the 64m a container needs")),
        None => Err(format!(
            "\"{text}\" is not a size like 20g or 512m (or \"none\" for no limit)"
        )),
    }
}

pub(crate) fn check_memory(text: &str) -> Result<i64, LimitError> {
    match parse_size(text) {
        Some(bytes) if bytes >= MIN_MEMORY => Ok(bytes),
        Some(_) => Err(LimitError::TooLittleMemory { text: text.into() }),
        None => Err(LimitError::NotASize { text: text.into() }),
    }
}

pub(crate) fn check_cpus(cpus: f64) -> Result<f64, LimitError> {
    if cpus.is_finite() && cpus > 0.0 && cpus <= 1024.0 {
        Ok(cpus)
    } else {
        Err(LimitError::Cpus { cpus })
    }
}

pub(super) fn check_cpus_text(text: &str) -> Result<f64, LimitError> {
    let cpus = text
        .trim()
        .parse::<f64>()
        .map_err(|source| LimitError::CpusText {
            text: text.into(),
            source,
        })?;
    check_cpus(cpus)
}

fn check_pids(pids: i64) -> Result<i64, LimitError> {
    if pids > 0 {
        Ok(pids)
    } else {
        Err(LimitError::Pids { pids })
    }
}

pub(super) fn check_pids_text(text: &str) -> Result<i64, LimitError> {
    let pids = text
        .trim()
        .parse::<i64>()
        .map_err(|source| LimitError::PidsText {
            text: text.into(),
            source,
        })?;
    check_pids(pids)
}

/// Parse "4g", "4gb", "4GiB", "512m", "1024k", "1.5g", "100" (bytes) into bytes; units are
/// powers of 1024, as in Docker. Negative, fractional bytes, overflow and garbage: `None`.
pub(crate) fn parse_size(text: &str) -> Option<i64> {
    let text = text.trim().to_ascii_lowercase();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    if split == 0 {
        return None;
    }
    let (number, unit) = text.split_at(split);
    let shift = match unit.trim_start() {
        "" | "b" => 0,
        "k" | "kb" | "ki" | "kib" => 10,
        "m" | "mb" | "mi" | "mib" => 20,
        "g" | "gb" | "gi" | "gib" => 30,
        "t" | "tb" | "ti" | "tib" => 40,
        "p" | "pb" | "pi" | "pib" => 50,
        _ => return None,
    };
    size_bytes(number, shift)
}

fn size_bytes(number: &str, shift: u32) -> Option<i64> {
    if let Ok(whole) = number.parse::<i64>() {
        return whole.checked_mul(1i64.checked_shl(shift)?);
    }
    let value = number.parse::<f64>().ok()? * (1u64 << shift) as f64;
    (value.is_finite() && value >= 0.0 && value < i64::MAX as f64 && value.fract() == 0.0)
        .then_some(value as i64)
}

impl Eval<'_> {
    /// defaults < hostRequirements < customizations.yolo.limits < runArgs < user config < flags.
    pub(super) fn limits(&self) -> Result<(Limits, Chooser)> {
        let mut limits = Limits::default();
        let repository = [
            self.host_requirements()?,
            self.yolo_limits()?,
            self.run_limits,
        ];
        let user = [self.input.user.limits, flag_limits(self.input.flags)?];
        let mut chosen_by = Chooser::Default;
        for layer in &repository {
            layer.apply(&mut limits);
            if layer.cpus.is_some() {
                chosen_by = Chooser::Repository;
            }
        }
        for layer in &user {
            layer.apply(&mut limits);
            if layer.cpus.is_some() {
                chosen_by = Chooser::User;
            }
        }
        Ok((limits, chosen_by))
    }

    /// The largest of every metadata entry's and devcontainer.json's (the spec's merge).
    fn host_requirements(&self) -> Result<LimitLayer> {
        let mut layer = LimitLayer::default();
        for (property, req) in self.host_requirement_entries() {
            let error = |field: &str, e: LimitError| {
                let property = match property.split_once(' ') {
                    Some((name, origin)) => format!("{name}.{field} {origin}"),
                    None => format!("{property}.{field}"),
                };
                self.config_error(&property, e)
            };
            if let Some(cpus) = req.cpus {
                let cpus = check_cpus(cpus).map_err(|e| error("cpus", e))?;
                layer.cpus = Some(layer.cpus.map_or(cpus, |c| c.max(cpus)));
            }
            if let Some(memory) = req.memory.as_deref() {
                let memory = check_memory(memory).map_err(|e| error("memory", e))?;
                layer.memory = Some(layer.memory.map_or(memory, |m| m.max(memory)));
            }
        }
        Ok(layer)
    }

    fn yolo_limits(&self) -> Result<LimitLayer> {
        let Some(yolo) = self.yolo() else {
            return Ok(LimitLayer::default());
        };
        let error = |field: &str, e: LimitError| {
            self.config_error(&format!("customizations.yolo.limits.{field}"), e)
        };
        LimitLayer::check(
            yolo.limits.cpus,
            yolo.limits.memory.as_deref(),
            yolo.limits.pids,
            error,
        )
    }
}

/// The flags' limits, already checked by their parsers (`settings`); checked again here so
/// `evaluate` holds whatever its caller passes.
fn flag_limits(flags: &Flags) -> Result<LimitLayer> {
    let error = |flag: &str, e: LimitError| Error::Usage(format!("--{flag}: {e}"));
    let mut layer = LimitLayer::check(flags.cpus, None, flags.pids, error)?;
    layer.memory = match flags.memory {
        Some(bytes) if bytes < MIN_MEMORY => {
            return Err(error(
                "memory",
                LimitError::TooLittleMemory {
                    text: format!("{bytes}b"),
                },
            ))
        }
        other => other,
    };
    Ok(layer)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn cpus_leave_the_host_a_core_unless_the_user_asks() {
        assert_eq!(fit_cpus(2.0, Chooser::Default, 2), (1.0, None));
        assert_eq!(fit_cpus(2.0, Chooser::Default, 8), (2.0, None));
        assert_eq!(fit_cpus(2.0, Chooser::Default, 1), (0.5, None));
        let (cpus, why) = fit_cpus(4.0, Chooser::Repository, 4);
        assert_eq!(cpus, 3.0);
        assert!(why.unwrap().contains("the repository asks for 4 CPUs"));
        assert_eq!(fit_cpus(2.0, Chooser::User, 2), (2.0, None));
        let (cpus, why) = fit_cpus(16.0, Chooser::User, 2);
        assert_eq!(cpus, 2.0);
        assert!(why.unwrap().contains("the engine has 2"));
    }

    #[test]
    fn who_chose_the_cpus_is_known() {
        let by = case(with_image(json!({}))).run().unwrap().cpus_chosen_by;
        assert_eq!(by, Chooser::Default);
        let repo = with_image(json!({"hostRequirements": {"cpus": 3}}));
        assert_eq!(
            case(repo.clone()).run().unwrap().cpus_chosen_by,
            Chooser::Repository
        );
        let mut c = case(repo);
        c.flags.cpus = Some(1.0);
        assert_eq!(c.run().unwrap().cpus_chosen_by, Chooser::User);
    }

    #[test]
    fn disk_sizes() {
        assert_eq!(check_disk("20g"), Ok(20 << 30));
        assert!(check_disk("1m").unwrap_err().contains("64m"));
        assert!(check_disk("lots").unwrap_err().contains("not a size"));
    }

    #[test]
    fn parse_size_units() {
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("100b"), Some(100));
        assert_eq!(parse_size("1024k"), Some(1 << 20));
        assert_eq!(parse_size("512m"), Some(512 << 20));
        assert_eq!(parse_size("4g"), Some(4 << 30));
        assert_eq!(parse_size("4gb"), Some(4 << 30));
        assert_eq!(parse_size("4GiB"), Some(4 << 30));
        assert_eq!(parse_size(" 8 GB "), Some(8 << 30));
        assert_eq!(parse_size("1.5g"), Some(3 << 29));
        for bad in [
            "",
            "-1g",
            "g",
            "4x",
            "4gbb",
            "1.2.3m",
            "0.5",
            "99999999999p",
            "+4g",
            "4 g b",
        ] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }

    #[test]
    fn limits_precedence() {
        let config = json!({
            "image": "x",
            "hostRequirements": {"cpus": 3, "memory": "8gb"},
            "customizations": {"yolo": {"limits": {"cpus": 4, "pids": 300}}},
            "runArgs": ["--cpus", "5", "--pids-limit", "400"]
        });
        let spec = ok(config.clone());
        assert_eq!(
            spec.limits,
            Limits {
                cpus: 5.0,
                memory_bytes: 8 << 30,
                pids: 400
            }
        );
        let mut c = case(config.clone());
        c.user.limits = LimitLayer {
            cpus: Some(1.0),
            memory: Some(2 << 30),
            pids: None,
        };
        c.flags.cpus = Some(0.5);
        assert_eq!(
            c.run().unwrap().limits,
            Limits {
                cpus: 0.5,
                memory_bytes: 2 << 30,
                pids: 400
            }
        );
        c.flags.pids = Some(10);
        c.flags.memory = Some(1 << 30);
        assert_eq!(
            c.run().unwrap().limits,
            Limits {
                cpus: 0.5,
                memory_bytes: 1 << 30,
                pids: 10
            }
        );
        let only_host = ok(json!({"image": "x", "hostRequirements": {"memory": "6g"}}));
        assert_eq!(
            only_host.limits,
            Limits {
                memory_bytes: 6 << 30,
                ..Limits::default()
            }
        );
        let only_yolo =
            ok(json!({"image": "x", "customizations": {"yolo": {"limits": {"memory": "3g"}}}}));
        assert_eq!(only_yolo.limits.memory_bytes, 3 << 30);
    }

    #[test]
    fn invalid_limits_name_their_source() {
        let (p, _) =
            config_err(case(json!({"image": "x", "hostRequirements": {"memory": "lots"}})).run());
        assert_eq!(p, "hostRequirements.memory");
        let (p, _) = config_err(
            case(json!({"image": "x", "customizations": {"yolo": {"limits": {"pids": 0}}}})).run(),
        );
        assert_eq!(p, "customizations.yolo.limits.pids");
        let (p, _) = config_err(
            case(json!({"image": "x", "customizations": {"yolo": {"limits": {"memory": "1k"}}}}))
                .run(),
        );
        assert_eq!(p, "customizations.yolo.limits.memory");
        let mut c = case(with_image(json!({})));
        c.flags.cpus = Some(f64::NAN);
        assert!(c.run().unwrap_err().to_string().starts_with("--cpus"));
    }

    #[test]
    fn text_limits_keep_the_parse_error_as_source() {
        use std::error::Error as _;
        let e = check_cpus_text("two").unwrap_err();
        assert_eq!(e.to_string(), "\"two\" is not a CPU count");
        assert!(e.source().is_some());
        assert!(check_pids_text("0").unwrap_err().source().is_none());
    }
}
