//! A Feature's `devcontainer-feature.json`, and the user's options turned into the environment
//! of its `install.sh` as the spec and the reference CLI do it (`getFeatureValueObject`,
//! `getSafeId`): the Feature's defaults, overlaid with the user's object; a plain string value
//! sets the `version` option; names become `[A-Z0-9_]`, values stay strings (`true`/`false`).
//!
//! The reference CLI does not check option values at all; yolo passes them through the same way
//! but warns about an option the Feature does not declare, a value of the wrong type and a value
//! outside an `enum`, since each usually means a typo that would otherwise go unnoticed.

use super::super::metadata::Entry;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The parts of `devcontainer-feature.json` resolution and ordering need; the container
/// contribution is read separately into a metadata `Entry`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FeatureJson {
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) version: Option<String>,
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) options: BTreeMap<String, OptionSpec>,
    #[serde(default)]
    pub(crate) depends_on: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub(crate) installs_after: Vec<String>,
    #[serde(default)]
    pub(crate) legacy_ids: Vec<String>,
    #[serde(default)]
    pub(crate) current_id: Option<String>,
}

/// One declared option.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub(crate) struct OptionSpec {
    #[serde(rename = "type", default)]
    pub(crate) kind: Option<String>,
    #[serde(default)]
    pub(crate) default: Option<serde_json::Value>,
    #[serde(rename = "enum", default)]
    pub(crate) allowed: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) proposals: Option<Vec<String>>,
}

/// Parse `devcontainer-feature.json` (its text) into what ordering needs and the Feature's
/// metadata entry, `id` set to `key`. The error is a sentence naming what is wrong.
pub(crate) fn parse_feature_json(text: &str, key: &str) -> Result<(FeatureJson, Entry), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let value: serde_json::Value = serde_json::from_str(&strip_jsonc(text))
        .map_err(|e| format!("devcontainer-feature.json is not valid JSON: {e}"))?;
    if !value.is_object() {
        return Err("devcontainer-feature.json must hold a JSON object".into());
    }
    match value.get("id") {
        Some(serde_json::Value::String(id)) if !id.is_empty() => {}
        _ => return Err("devcontainer-feature.json has no \"id\" (a non-empty string)".into()),
    }
    let feature: FeatureJson = serde_path_to_error::deserialize(&value)
        .map_err(|e| format!("devcontainer-feature.json: \"{}\": {}", e.path(), e.inner()))?;
    let mut entry: Entry = serde_path_to_error::deserialize(&value)
        .map_err(|e| format!("devcontainer-feature.json: \"{}\": {}", e.path(), e.inner()))?;
    // Each becomes an `ENV NAME="value"` line of the generated Dockerfile: a name that is not
    // a variable name (a newline, a quote) could add instructions of its own.
    if let Some(bad) = entry.container_env.keys().find(|k| !is_env_name(k)) {
        return Err(format!(
            "devcontainer-feature.json: \"containerEnv\": {} is not a variable name (letters, digits and _, not starting with a digit)",
            serde_json::Value::String(crate::visible::escape_controls(bad))
        ));
    }
    entry.id = Some(key.to_string());
    Ok((feature, entry))
}

/// A POSIX environment variable name.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// JSONC (comments, trailing commas, as the reference CLI's `jsonc.parse` accepts) to JSON:
/// comments and trailing commas become spaces, so positions in errors stay right.
fn strip_jsonc(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..]
                    .find("*/")
                    .map(|e| i + 2 + e + 2)
                    .unwrap_or(bytes.len());
                for b in &mut out[i..end] {
                    if *b != b'\n' {
                        *b = b' ';
                    }
                }
                i = end;
            }
            b',' => {
                let next = out[i + 1..].iter().position(|b| !b.is_ascii_whitespace());
                let next = next.and_then(|n| out.get(i + 1 + n));
                if matches!(next, Some(b'}') | Some(b']')) {
                    out[i] = b' ';
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    // Only ASCII bytes were replaced (by spaces), so the text is still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// The spec's environment variable name for an option (`getSafeId`): every character other
/// than a letter, digit or `_` becomes `_`, a leading run of digits and underscores becomes one
/// `_`, and the result is upper-cased.
pub(crate) fn safe_id(name: &str) -> String {
    let replaced: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let rest = replaced.trim_start_matches(|c: char| c.is_ascii_digit() || c == '_');
    let out = if rest.len() < replaced.len() {
        format!("_{rest}")
    } else {
        replaced
    };
    out.to_uppercase()
}

/// The options' environment for `install.sh`, and warnings about the user's values.
pub(crate) fn option_env(
    feature: &FeatureJson,
    value: &serde_json::Value,
) -> Result<(BTreeMap<String, String>, Vec<String>), String> {
    let mut values: BTreeMap<String, serde_json::Value> = feature
        .options
        .iter()
        .filter_map(|(name, spec)| spec.default.clone().map(|d| (name.clone(), d)))
        .collect();
    let mut warnings = Vec::new();
    match value {
        serde_json::Value::Object(map) => {
            for (name, v) in map {
                warnings.extend(check_value(feature, name, v));
                values.insert(name.clone(), v.clone());
            }
        }
        serde_json::Value::String(s) => {
            if feature.options.contains_key("version") {
                warnings.extend(check_value(feature, "version", value));
                values.insert("version".into(), serde_json::Value::String(s.clone()));
            } else {
                warnings.push(format!(
                    "the value \"{s}\" is ignored: Feature \"{}\" has no \"version\" option; \
                     give options as an object",
                    feature.id
                ));
            }
        }
        // `true` (or `{}`): the defaults. The reference CLI would pass `true` on as the
        // `version` option's value, which no Feature expects.
        serde_json::Value::Bool(_) | serde_json::Value::Null => {}
        other => {
            return Err(format!(
                "the value must be an object of options, a version string or true, not {other}"
            ))
        }
    }
    let mut env = BTreeMap::new();
    for (name, v) in values {
        let text = match v {
            serde_json::Value::String(s) => s,
            serde_json::Value::Bool(b) => b.to_string(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Null => continue,
            other => {
                return Err(format!(
                    "option \"{name}\" must be a string or a boolean, not {other}"
                ))
            }
        };
        env.insert(safe_id(&name), text);
    }
    Ok((env, warnings))
}

fn check_value(feature: &FeatureJson, name: &str, v: &serde_json::Value) -> Option<String> {
    let id = &feature.id;
    let Some(spec) = feature.options.get(name) else {
        let known: Vec<&str> = feature.options.keys().map(String::as_str).collect();
        let known = if known.is_empty() {
            "it has none".to_string()
        } else {
            format!("it has: {}", known.join(", "))
        };
        return Some(format!(
            "option \"{name}\" is not an option of Feature \"{id}\" ({known}); it is passed on as {}",
            safe_id(name)
        ));
    };
    match (spec.kind.as_deref(), v) {
        (Some("boolean"), serde_json::Value::Bool(_)) => None,
        (Some("boolean"), serde_json::Value::String(s)) if s == "true" || s == "false" => None,
        (Some("boolean"), other) => Some(format!(
            "option \"{name}\" of Feature \"{id}\" is a boolean, but the value is {other}"
        )),
        (Some("string"), serde_json::Value::String(s)) => match &spec.allowed {
            Some(allowed) if !allowed.contains(s) => Some(format!(
                "option \"{name}\" of Feature \"{id}\" is one of {}, not \"{s}\"",
                allowed.join(", ")
            )),
            _ => None,
        },
        (Some("string"), other) => Some(format!(
            "option \"{name}\" of Feature \"{id}\" is a string, but the value is {other}"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn feature() -> FeatureJson {
        let text = json!({
            "id": "node",
            "version": "1.6.0",
            "options": {
                "version": {"type": "string", "proposals": ["lts", "18"], "default": "lts"},
                "nodeGypDependencies": {"type": "boolean", "default": true},
                "install-tools": {"type": "string", "enum": ["yes", "no"], "default": "no"},
                "noDefault": {"type": "string"}
            },
            "containerEnv": {"NVM_DIR": "/usr/local/share/nvm"},
            "privileged": true,
            "capAdd": ["SYS_PTRACE"],
            "mounts": [{"type": "volume", "source": "dind-var-lib-docker", "target": "/var/lib/docker"}],
            "postCreateCommand": "echo hi",
            "dependsOn": {"ghcr.io/devcontainers/features/common-utils:2": {}},
            "installsAfter": ["ghcr.io/devcontainers/features/git"]
        })
        .to_string();
        parse_feature_json(&text, "ghcr.io/x/node:1").unwrap().0
    }

    #[test]
    fn safe_ids_follow_the_reference_cli() {
        assert_eq!(safe_id("option_name"), "OPTION_NAME");
        assert_eq!(
            safe_id("option1-name-with_dashes-"),
            "OPTION1_NAME_WITH_DASHES_"
        );
        assert_eq!(safe_id("1_2version"), "_VERSION");
        assert_eq!(safe_id("__x"), "_X");
        assert_eq!(safe_id("a.b c"), "A_B_C");
        assert_eq!(safe_id("nodeGypDependencies"), "NODEGYPDEPENDENCIES");
    }

    #[test]
    fn defaults_and_user_values() {
        let f = feature();
        let (env, warnings) = option_env(&f, &json!({})).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(
            env,
            BTreeMap::from([
                ("INSTALL_TOOLS".to_string(), "no".to_string()),
                ("NODEGYPDEPENDENCIES".to_string(), "true".to_string()),
                ("VERSION".to_string(), "lts".to_string()),
            ])
        );
        let (env, _) =
            option_env(&f, &json!({"nodeGypDependencies": false, "version": "18"})).unwrap();
        assert_eq!(env["NODEGYPDEPENDENCIES"], "false");
        assert_eq!(env["VERSION"], "18");
        let (env, _) = option_env(&f, &json!("20")).unwrap();
        assert_eq!(env["VERSION"], "20");
        let (env, _) = option_env(&f, &json!(true)).unwrap();
        assert_eq!(env["VERSION"], "lts");
    }

    #[test]
    fn unknown_options_and_wrong_types_warn() {
        let f = feature();
        let (env, warnings) = option_env(
            &f,
            &json!({"verison": "18", "nodeGypDependencies": "yes", "install-tools": "maybe"}),
        )
        .unwrap();
        assert_eq!(env["VERISON"], "18");
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(
            warnings[2].contains("\"verison\" is not an option"),
            "{warnings:?}"
        );
        assert!(warnings[1].contains("is a boolean"), "{warnings:?}");
        assert!(warnings[0].contains("one of yes, no"), "{warnings:?}");
        assert!(option_env(&f, &json!({"version": ["a"]})).is_err());
        assert!(option_env(&f, &json!(3)).is_err());
    }

    #[test]
    fn feature_json_is_parsed_into_metadata() {
        let text = json!({
            "id": "dind", "version": "2.0.0",
            "privileged": true, "init": true,
            "capAdd": ["NET_ADMIN"], "securityOpt": ["seccomp=unconfined"],
            "entrypoint": "/usr/local/share/docker-init.sh",
            "containerEnv": {"DOCKER_BUILDKIT": "1"},
            "mounts": [{"type": "volume", "source": "dind", "target": "/var/lib/docker"}],
            "customizations": {"vscode": {"extensions": ["ms-azuretools.vscode-docker"]}},
            "onCreateCommand": ["echo", "x"]
        })
        .to_string();
        let (f, entry) = parse_feature_json(&text, "ghcr.io/x/dind:2").unwrap();
        assert_eq!(f.id, "dind");
        assert_eq!(f.version.as_deref(), Some("2.0.0"));
        assert_eq!(entry.id.as_deref(), Some("ghcr.io/x/dind:2"));
        assert_eq!(entry.privileged, Some(true));
        assert_eq!(entry.init, Some(true));
        assert_eq!(entry.cap_add, vec!["NET_ADMIN"]);
        assert_eq!(entry.security_opt, vec!["seccomp=unconfined"]);
        assert_eq!(
            entry.entrypoint.as_deref(),
            Some("/usr/local/share/docker-init.sh")
        );
        assert_eq!(entry.container_env["DOCKER_BUILDKIT"], "1");

        assert_eq!(entry.mounts.len(), 1);
        assert!(entry.customizations.is_some());
        assert!(entry.on_create_command.is_some());
    }

    #[test]
    fn a_container_env_name_that_is_no_variable_name_is_refused() {
        for bad in ["A=\\\"1\\\"\\nADD http://x/ /x\\nENV B", "1A", "A B", ""] {
            let text = format!(r#"{{"id": "f", "containerEnv": {{"{bad}": "v"}}}}"#);
            let e = parse_feature_json(&text, "./f").unwrap_err();
            assert!(e.contains("is not a variable name"), "{bad}: {e}");
        }
        parse_feature_json(r#"{"id": "f", "containerEnv": {"_A1": "v"}}"#, "./f").unwrap();
    }

    #[test]
    fn comments_and_trailing_commas_are_accepted() {
        let text = "{\n  // the id\n  \"id\": \"a\", /* inline, */\n  \"capAdd\": [\"X\",],\n  \"u\": \"http://x//y\",\n}\n";
        let (f, entry) = parse_feature_json(text, "k").unwrap();
        assert_eq!(f.id, "a");
        assert_eq!(entry.cap_add, vec!["X"]);
        assert_eq!(strip_jsonc("\"a,]\""), "\"a,]\"");
    }

    #[test]
    fn bad_feature_json() {
        assert!(parse_feature_json("{", "k")
            .unwrap_err()
            .contains("not valid JSON"));
        assert!(parse_feature_json("{}", "k")
            .unwrap_err()
            .contains("\"id\""));
        assert!(parse_feature_json("[]", "k")
            .unwrap_err()
            .contains("object"));
        let err = parse_feature_json(r#"{"id":"a","capAdd":"X"}"#, "k").unwrap_err();
        assert!(err.contains("capAdd"), "{err}");
        let err = parse_feature_json(r#"{"id":"a","installsAfter":"X"}"#, "k").unwrap_err();
        assert!(err.contains("installsAfter"), "{err}");
    }
}
