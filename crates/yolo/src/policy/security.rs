//! The requests that switch parts of the sandbox off or reach the host's hardware: `privileged`,
//! `capAdd`, `securityOpt` (and their runArgs spellings), `--device`, and GPUs (`--gpus`,
//! `--runtime=nvidia`, `hostRequirements.gpu`). Each needs its grant, and is declined without it
//! (`Eval::allow`); `no-new-privileges` is what yolo sets anyway and passes without one.

use super::grants::{normalize_cap, Need};
use super::Eval;
use crate::error::Result;
use crate::run_spec::{Gpus, RunSpec};

impl Eval<'_> {
    pub(super) fn apply_security(&mut self, spec: &mut RunSpec) -> Result<()> {
        if self.config.privileged == Some(true) {
            self.grant_privileged(spec, "privileged")?;
        }
        for (i, cap) in self.config.cap_add.iter().enumerate() {
            self.grant_cap(spec, &format!("capAdd[{i}]"), cap)?;
        }
        for (i, opt) in self.config.security_opt.iter().enumerate() {
            self.grant_security_opt(spec, &format!("securityOpt[{i}]"), opt)?;
        }
        Ok(())
    }

    pub(super) fn grant_privileged(&mut self, spec: &mut RunSpec, property: &str) -> Result<()> {
        let reason = "a privileged container can take over the host";
        if self.allow(Need::Privileged, property, "privileged mode", reason)? {
            spec.privileged = true;
        }
        Ok(())
    }

    pub(super) fn grant_cap(
        &mut self,
        spec: &mut RunSpec,
        property: &str,
        cap: &str,
    ) -> Result<()> {
        let cap = normalize_cap(cap);
        if cap.is_empty() || !cap.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(self.config_error(property, format!("\"{cap}\" is not a capability name")));
        }
        let reason = "yolo drops every capability so the agent cannot escape its sandbox";
        let granted = self.allow(
            Need::Cap(cap.clone()),
            property,
            &format!("capability {cap}"),
            reason,
        )?;
        if granted && !spec.cap_add.contains(&cap) {
            spec.cap_add.push(cap);
        }
        Ok(())
    }

    pub(super) fn grant_security_opt(
        &mut self,
        spec: &mut RunSpec,
        property: &str,
        opt: &str,
    ) -> Result<()> {
        let opt = opt.trim();
        if keeps_no_new_privileges(opt) {
            return Ok(());
        }
        let reason = "security options can switch off the sandbox (seccomp, AppArmor, SELinux)";
        let value = format!("security option {opt}");
        let granted = self.allow(Need::SecurityOpt(opt.into()), property, &value, reason)?;
        if granted && !spec.security_opt.iter().any(|o| o == opt) {
            spec.security_opt.push(opt.into());
        }
        Ok(())
    }

    pub(super) fn grant_device(
        &mut self,
        spec: &mut RunSpec,
        property: &str,
        device: &str,
    ) -> Result<()> {
        if device.is_empty() {
            return Err(self.config_error(property, "--device needs a device path"));
        }
        let reason = "a host device gives the container direct access to hardware";
        let granted = self.allow(
            Need::Device,
            property,
            &format!("the host device {device}"),
            reason,
        )?;
        if granted && !spec.devices.iter().any(|d| d == device) {
            spec.devices.push(device.into());
        }
        Ok(())
    }
}

impl Eval<'_> {
    /// GPUs `asked` for by `property`: with a `gpu` grant, the engine's device request (the
    /// largest of several asks); without, declined (or refused).
    pub(super) fn grant_gpus(
        &mut self,
        spec: &mut RunSpec,
        property: &str,
        value: &str,
        asked: Gpus,
    ) -> Result<()> {
        let Some((gpus, grant)) = self.grants.gpus(&asked) else {
            let reason = "a GPU gives the container the host's GPU driver and device files";
            self.allow(Need::Gpu, property, value, reason)?;
            return Ok(());
        };
        let grant = grant.to_string();
        self.record_use(grant);
        spec.gpus = Some(match (spec.gpus.take(), gpus) {
            (Some(Gpus::All), _) | (_, Gpus::All) => Gpus::All,
            (Some(Gpus::Count(a)), Gpus::Count(b)) => Gpus::Count(a.max(b)),
            (None, gpus) => gpus,
        });
        Ok(())
    }

    /// `hostRequirements.gpu` (the metadata entries' and devcontainer.json's): `true` or an
    /// object asks for a GPU; `"optional"` takes one only when granted, and is otherwise left
    /// out (declined with a note even under `requests = "refuse"`: the config says it runs
    /// without).
    pub(super) fn apply_host_gpus(&mut self, spec: &mut RunSpec) -> Result<()> {
        let asks: Vec<(String, serde_json::Value)> = self
            .host_requirement_entries()
            .into_iter()
            .filter_map(|(property, h)| h.gpu.clone().map(|g| (format!("{property}.gpu"), g)))
            .collect();
        for (property, gpu) in asks {
            match gpu {
                serde_json::Value::Bool(false) | serde_json::Value::Null => {}
                serde_json::Value::String(s) if s == "optional" => {
                    if self.grants.gpus(&Gpus::All).is_some() {
                        self.grant_gpus(spec, &property, "an optional GPU", Gpus::All)?;
                    } else {
                        let reason = "a GPU gives the container the host's GPU driver and device files; the config runs without one";
                        let grant = super::grants::Need::Gpu.narrowest().to_string();
                        self.decline(&property, "an optional GPU", reason, Some(grant));
                    }
                }
                serde_json::Value::Bool(true) | serde_json::Value::Object(_) => {
                    self.grant_gpus(spec, &property, "a GPU", Gpus::All)?;
                }
                other => {
                    return Err(self.config_error(
                        &property,
                        format!("{other} is not true, false, \"optional\" or an object"),
                    ))
                }
            }
        }
        Ok(())
    }
}

/// `--gpus VALUE` as `docker run` reads it: `all`, a count, `device=ID[,ID]` (as many GPUs as
/// IDs: yolo asks the engine for a count), or `count=N[,capabilities=...]`.
pub(super) fn parse_gpus_arg(text: &str) -> Option<Gpus> {
    let text = text.trim().trim_matches('"');
    if let Some(gpus) = super::grants::parse_gpus(text) {
        return Some(gpus);
    }
    let mut out = None;
    for part in text.split(',') {
        match part.split_once('=') {
            Some(("count", n)) => out = super::grants::parse_gpus(n),
            Some(("device", _)) => out = Some(Gpus::Count(1)),
            Some(("capabilities" | "driver", _)) => {}
            // The rest of a `device=0,1` list.
            None if out.is_some() && !part.is_empty() => {
                if let Some(Gpus::Count(n)) = out {
                    out = Some(Gpus::Count(n + 1));
                }
            }
            _ => return None,
        }
    }
    out
}

/// `no-new-privileges`, `no-new-privileges=true`, `no-new-privileges:true`: what yolo sets anyway.
pub(super) fn keeps_no_new_privileges(opt: &str) -> bool {
    matches!(
        opt.strip_prefix("no-new-privileges"),
        Some("" | "=true" | ":true")
    )
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn privileged_is_refused_then_granted() {
        let c = rcase(with_image(json!({"privileged": true})));
        let (property, value, grant) = refused(c.run());
        assert_eq!(property, "privileged");
        assert_eq!(value, "privileged mode");
        assert_grant_text(&grant, "privileged");
        let spec = c.grant(&["privileged"]).run().unwrap();
        assert!(spec.privileged);
        assert_eq!(spec.grants_used, ["privileged"]);
        assert!(!ok(with_image(json!({"privileged": false}))).privileged);
    }

    #[test]
    fn cap_add_is_refused_normalized_then_granted() {
        let c = rcase(with_image(json!({"capAdd": ["NET_RAW", "CAP_SYS_PTRACE"]})));
        let (property, value, grant) = refused(c.run());
        assert_eq!(property, "capAdd[0]");
        assert_eq!(value, "capability NET_RAW");
        assert_grant_text(&grant, "cap-add=NET_RAW");
        let (property, value, _) =
            refused(rcase(c.config.clone()).grant(&["cap-add=net_raw"]).run());
        assert_eq!(
            (property.as_str(), value.as_str()),
            ("capAdd[1]", "capability SYS_PTRACE")
        );
        let spec = rcase(c.config.clone())
            .grant(&["cap-add=NET_RAW", "cap-add=sys_ptrace"])
            .run()
            .unwrap();
        assert_eq!(spec.cap_add, ["NET_RAW", "SYS_PTRACE"]);
        assert_eq!(spec.grants_used, ["cap-add=NET_RAW", "cap-add=SYS_PTRACE"]);
        let spec = rcase(c.config.clone()).grant(&["cap-add"]).run().unwrap();
        assert_eq!(spec.grants_used, ["cap-add"]);
    }

    /// Everything a config needs granted is in one error, each request with its grant, and
    /// the flags that allow them all; what no grant allows ends the list.
    #[test]
    fn every_refusal_of_a_config_is_listed_at_once() {
        let c = rcase(with_image(json!({
            "capAdd": ["SYS_PTRACE"],
            "securityOpt": ["seccomp=unconfined"],
            "privileged": true
        })));
        let Err(crate::error::Error::RefusedMany { refusals, grants }) = c.run() else {
            panic!("expected several refusals, got {:?}", c.run());
        };
        assert_eq!(
            grants,
            [
                "privileged",
                "cap-add=SYS_PTRACE",
                "security-opt=seccomp=unconfined"
            ]
        );
        assert_eq!(refusals.len(), 3);
        let text = crate::error::Error::RefusedMany { refusals, grants }.to_string();
        assert!(text.starts_with("3 requests need a grant:\n  - "), "{text}");
        assert!(
            text.contains("\"capAdd[0]\" asks for capability SYS_PTRACE"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "the grants they need: --grant privileged --grant cap-add=SYS_PTRACE --grant security-opt=seccomp=unconfined"
            ),
            "{text}"
        );
        // Granted all at once, it runs.
        let spec = rcase(c.config.clone())
            .grant(&[
                "privileged",
                "cap-add=SYS_PTRACE",
                "security-opt=seccomp=unconfined",
            ])
            .run()
            .unwrap();
        assert!(spec.privileged);
        // What no grant allows, met past the grants, is in the list too, and first (with no
        // grant of its own): granting the rest would not help while it stays.
        let c = rcase(with_image(json!({
            "capAdd": ["SYS_PTRACE"],
            "runArgs": ["--network", "host"]
        })));
        let Err(crate::error::Error::RefusedMany { refusals, grants }) = c.run() else {
            panic!("expected several refusals, got {:?}", c.run());
        };
        assert_eq!(grants, ["cap-add=SYS_PTRACE"]);
        assert!(matches!(
            refusals.first(),
            Some(crate::error::Error::Forbidden { .. })
        ));
        let text = crate::error::Error::RefusedMany { refusals, grants }.to_string();
        assert!(
            text.starts_with("1 request no grant allows, and 1 that needs a grant:\n  - "),
            "{text}"
        );
        assert!(text.contains("--network=host"), "{text}");
        // One of each kind reads in the singular.
        let one = crate::error::Error::RefusedMany {
            refusals: vec![refused_error(rcase(with_image(
                json!({"privileged": true}),
            )))],
            grants: vec!["privileged".into()],
        }
        .to_string();
        assert!(one.starts_with("1 request needs a grant:"), "{one}");
        // One refusal stays a refusal of its own.
        let (property, _, _) = refused(rcase(with_image(json!({"privileged": true}))).run());
        assert_eq!(property, "privileged");
        assert!(matches!(
            rcase(with_image(json!({"privileged": true}))).run(),
            Err(crate::error::Error::Refused { .. })
        ));
    }

    #[test]
    fn gpus_are_granted_counted_and_otherwise_declined() {
        use crate::run_spec::Gpus;
        let gpus =
            |args: &[&str], grants: &[&str]| run_args(args).grant(grants).run().unwrap().gpus;
        assert_eq!(gpus(&["--gpus", "all"], &["gpu"]), Some(Gpus::All));
        assert_eq!(gpus(&["--gpus", "all"], &["gpu=2"]), Some(Gpus::Count(2)));
        assert_eq!(gpus(&["--gpus=3"], &["gpu=2"]), Some(Gpus::Count(2)));
        assert_eq!(gpus(&["--gpus", "1"], &["gpu=all"]), Some(Gpus::Count(1)));
        assert_eq!(
            gpus(&["--gpus", "\"device=0,1\""], &["gpu"]),
            Some(Gpus::Count(2))
        );
        assert_eq!(gpus(&["--runtime", "nvidia"], &["gpu"]), Some(Gpus::All));
        assert_eq!(gpus(&["--gpus", "all"], &[]), None);
        let spec = ok(with_image(json!({"hostRequirements": {"gpu": true}})));
        assert_eq!(spec.gpus, None);
        assert_eq!(
            declined(&spec),
            [(
                "hostRequirements.gpu".to_string(),
                "a GPU".to_string(),
                Some("gpu".to_string())
            )]
        );
        let spec = case(with_image(
            json!({"hostRequirements": {"gpu": {"cores": 2}}}),
        ))
        .grant(&["gpu"])
        .run()
        .unwrap();
        assert_eq!(
            (spec.gpus, spec.grants_used),
            (Some(Gpus::All), vec!["gpu".to_string()])
        );
        // "optional" runs without one: declined with a note even when refusing.
        let spec = rcase(with_image(json!({"hostRequirements": {"gpu": "optional"}})))
            .run()
            .unwrap();
        assert_eq!((spec.gpus, spec.declined.len()), (None, 1));
        let (property, _, grant) =
            refused(rcase(with_image(json!({"hostRequirements": {"gpu": true}}))).run());
        assert_eq!(property, "hostRequirements.gpu");
        assert_grant_text(&grant, "gpu");
        assert!("gpu=0".parse::<super::super::Grant>().is_err());
        assert!("gpu=some".parse::<super::super::Grant>().is_err());
    }

    fn refused_error(c: super::super::test_support::Case) -> crate::error::Error {
        c.run().unwrap_err()
    }

    #[test]
    fn security_opt_is_refused_except_no_new_privileges() {
        let c = rcase(with_image(
            json!({"securityOpt": ["no-new-privileges:true", "seccomp=unconfined"]}),
        ));
        let (property, value, grant) = refused(c.run());
        assert_eq!(property, "securityOpt[1]");
        assert_eq!(value, "security option seccomp=unconfined");
        assert_grant_text(&grant, "security-opt=seccomp=unconfined");
        let spec = rcase(c.config.clone())
            .grant(&["security-opt"])
            .run()
            .unwrap();
        assert_eq!(spec.security_opt, ["seccomp=unconfined"]);
        let (_, value, _) = refused(
            rcase(with_image(
                json!({"securityOpt": ["no-new-privileges=false"]}),
            ))
            .run(),
        );
        assert!(value.contains("no-new-privileges=false"));
    }
}
