//! JSONC -> `DevContainer`, with errors naming file:line:column and the property.
//!
//! devcontainer.json is JSON with comments and trailing commas (VS Code's "JSONC"). Rather than a
//! second parser, a pre-pass blanks comments and trailing commas out with spaces, keeping every
//! byte offset and line break, so serde_json's positions stay valid for the original text.
//! Errors then carry the property path from `serde_path_to_error`.
//!
//! This module decides only what yolo can run at all (a Compose config needs both
//! `dockerComposeFile` and `service`);
//! what a repository may ask for is `policy`'s business.
use super::model::DevContainer;
use crate::error::{Error, Result};
use serde_path_to_error::Segment;
use std::path::Path;

pub(crate) fn parse_file(path: &Path) -> Result<DevContainer> {
    let bytes = crate::digest::read(path).map_err(|e| Error::io(path, e))?;
    match String::from_utf8(bytes) {
        Ok(text) => parse_str(&text, path),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            // Everything before `valid` is UTF-8 by definition, so this slice cannot fail.
            let prefix = std::str::from_utf8(&e.as_bytes()[..valid]).unwrap_or_default();
            // Columns are counted without a BOM, as in `parse_str`.
            let prefix = prefix.strip_prefix('\u{feff}').unwrap_or(prefix);
            let (line, column) = line_col(prefix, prefix.len());
            Err(config_error(
                path,
                Some((line, column)),
                None,
                "the file is not valid UTF-8; save it as UTF-8".into(),
            ))
        }
    }
}

pub(crate) fn parse_str(text: &str, path: &Path) -> Result<DevContainer> {
    // Editors on Windows like to write a BOM. It is invisible, so columns are counted without it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let json = blank_jsonc(text).map_err(|offset| {
        config_error(
            path,
            Some(line_col(text, offset)),
            None,
            "this /* comment is never closed with */".into(),
        )
    })?;
    match json.bytes().position(|b| !b.is_ascii_whitespace()) {
        None => {
            return Err(config_error(
                path,
                None,
                None,
                "the file is empty; it should hold a JSON object such as {\"image\": \"debian:bookworm\"}"
                    .into(),
            ))
        }
        Some(start) if json.as_bytes()[start] != b'{' => {
            return Err(config_error(
                path,
                Some(line_col(text, start)),
                None,
                "expected a JSON object ({ ... }) at the top level".into(),
            ))
        }
        Some(_) => {}
    }
    let mut config = deserialize(text, &json, path)?;
    if let Ok(object) = serde_json::from_str(&json) {
        config.warnings = super::properties::warnings(&object);
    }
    check_supported(&config, path)?;
    check_has_image(&config, path)?;
    Ok(config)
}

/// The file as plain JSON (comments and trailing commas blanked), for what yolo does not model
/// but passes on (the container's `devcontainer.metadata` label). `None` when it cannot be
/// read or parsed: `parse_file` is what reports that.
pub(crate) fn raw_value(path: &Path) -> Option<serde_json::Value> {
    let text = crate::digest::read_to_string(path).ok()?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    serde_json::from_str(&blank_jsonc(text).ok()?).ok()
}

fn deserialize(text: &str, json: &str, path: &Path) -> Result<DevContainer> {
    let mut de = serde_json::Deserializer::from_str(json);
    let config: DevContainer = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let segments: Vec<Segment> = e.path().iter().cloned().collect();
        serde_error(text, json, path, segments, e.inner())
    })?;
    // `from_str` would check this for us; the explicit deserializer does not.
    de.end()
        .map_err(|e| serde_error(text, json, path, Vec::new(), &e))?;
    Ok(config)
}

/// Refuse what yolo cannot run yet, by property name, instead of silently ignoring it.
fn check_supported(config: &DevContainer, path: &Path) -> Result<()> {
    // Features are installed (`devcontainer::features`); only their shape is checked here.
    if !matches!(
        &config.features,
        None | Some(serde_json::Value::Null | serde_json::Value::Object(_))
    ) {
        return Err(config_error(
            path,
            None,
            Some("features".into()),
            "expected an object mapping each Feature to its options, such as {\"ghcr.io/devcontainers/features/node:1\": {}}".into(),
        ));
    }
    // A Compose config needs both: the files and the service the agent runs in.
    let compose_files = config.docker_compose_file.as_ref().map(|f| &f.0);
    match (compose_files, &config.service) {
        (Some(files), Some(service)) => {
            if files.is_empty() || files.iter().any(|f| f.trim().is_empty()) {
                return Err(config_error(
                    path,
                    None,
                    Some("dockerComposeFile".into()),
                    "name a Compose file (or a list of them), relative to this file's folder"
                        .into(),
                ));
            }
            if service.trim().is_empty() {
                return Err(config_error(
                    path,
                    None,
                    Some("service".into()),
                    "name the Compose service yolo runs the agent in".into(),
                ));
            }
        }
        (Some(_), None) => {
            return Err(config_error(
                path,
                None,
                Some("service".into()),
                "a config with \"dockerComposeFile\" needs \"service\": the Compose service yolo runs the agent in".into(),
            ))
        }
        // A stray `service` is ignored with a warning (`properties`), as the reference CLI does.
        (None, _) => {}
    }
    Ok(())
}

fn check_has_image(config: &DevContainer, path: &Path) -> Result<()> {
    if config.docker_compose_file.is_some() {
        // The Compose file says what runs.
        return Ok(());
    }
    let set = |v: Option<&String>| v.is_some_and(|s| !s.trim().is_empty());
    let dockerfile = config.build.as_ref().and_then(|b| b.dockerfile.as_ref());
    if set(config.image.as_ref()) || set(dockerfile) || set(config.docker_file.as_ref()) {
        return Ok(());
    }
    Err(config_error(
        path,
        None,
        None,
        "nothing to run: set \"image\" (e.g. \"debian:bookworm\") or \"build.dockerfile\" \
         (a Dockerfile path relative to this file)"
            .into(),
    ))
}

fn config_error(
    path: &Path,
    position: Option<(usize, usize)>,
    property: Option<String>,
    message: String,
) -> Error {
    Error::Config {
        file: path.to_path_buf(),
        line: position.map(|p| p.0),
        column: position.map(|p| p.1),
        property,
        message,
    }
}

/// A serde_json error as a human reads it: the property, where its value starts, and a message in
/// JSON's words (object, array) rather than Rust's (struct, map, sequence, u16).
fn serde_error(
    text: &str,
    json: &str,
    path: &Path,
    mut segments: Vec<Segment>,
    inner: &serde_json::Error,
) -> Error {
    let raw = strip_position(&inner.to_string());
    let is_data = inner.classify() == serde_json::error::Category::Data;
    // Past an unknown segment (a syntax error mid-value) the path says nothing useful.
    if let Some(unknown) = segments.iter().position(|s| matches!(s, Segment::Unknown)) {
        segments.truncate(unknown);
    }
    if let Some(key) = is_data.then(|| named_field(&raw)).flatten() {
        // Unknown and duplicate keys fail while the key is read; name the key if the path has not.
        if !matches!(segments.last(), Some(Segment::Map { key: last }) if *last == key) {
            segments.push(Segment::Map { key });
        }
    }
    let property = Some(property_name(&segments)).filter(|p| !p.is_empty());
    // serde_json reports data errors where the value ends (for untagged enums, where the buffered
    // value ends); pointing at where it starts is what an editor user expects.
    let located = if is_data && !segments.is_empty() {
        locate(json, &segments)
    } else {
        None
    };
    let position = match located {
        Some(offset) => Some(line_col(text, offset)),
        None if inner.line() > 0 => Some(serde_line_col(text, inner.line(), inner.column())),
        None => None,
    };
    let mut message = humanize(&raw);
    if is_data && is_expecting_text(&raw) {
        // An untagged enum's message only says what was expected; say what was found too.
        if let Some(found) = located.and_then(|offset| describe_value_at(json, offset)) {
            // "expected ... an object ..., found an object" needs a nudge to look inside.
            let inside = match found.as_str() {
                "an object" if raw.contains("object") => " with a value that does not fit",
                "an array" if raw.contains("array") => " with an item that does not fit",
                _ => "",
            };
            message = format!("{message}, found {found}{inside}");
        }
    }
    config_error(path, position, property, message)
}

/// serde_json appends " at line L column C"; the position is reported separately.
fn strip_position(message: &str) -> String {
    if let Some(idx) = message.rfind(" at line ") {
        let tail = &message[idx + " at line ".len()..];
        let is_position = tail
            .split_once(" column ")
            .is_some_and(|(l, c)| is_digits(l) && is_digits(c));
        if is_position {
            return message[..idx].to_string();
        }
    }
    message.to_string()
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// The key of an "unknown field `key`, expected ..." or "duplicate field `key`" error.
fn named_field(message: &str) -> Option<String> {
    let rest = message
        .strip_prefix("unknown field `")
        .or_else(|| message.strip_prefix("duplicate field `"))?;
    let end = rest.find('`')?;
    Some(rest[..end].to_string())
}

/// An untagged enum's `expecting` text ("a port number or ...") is the whole message: serde's
/// derive uses it in place of "data did not match any variant of untagged enum ...".
fn is_expecting_text(message: &str) -> bool {
    message.starts_with("a ") || message.starts_with("an ")
}

/// Rewrite serde's Rust-flavoured wording into JSON terms, with a hint for common slips.
fn humanize(message: &str) -> String {
    if is_expecting_text(message) {
        return format!("expected {message}");
    }
    match message {
        "expected `,` or `}`" | "expected `,` or `]`" => {
            return format!("{message}; is a comma missing before this?")
        }
        "EOF while parsing an object" => {
            return "the file ends before this object is closed; is a `}` missing?".into()
        }
        "EOF while parsing a list" => {
            return "the file ends before this array is closed; is a `]` missing?".into()
        }
        "EOF while parsing a string" => {
            return "the file ends inside a string; is a `\"` missing?".into()
        }
        "trailing characters" => {
            return "unexpected text after the end of the top-level object".into()
        }
        _ => {}
    }
    let mut out = message.to_string();
    if let Some(idx) = out.find(", expected struct ") {
        out.replace_range(idx.., ", expected an object");
    }
    for (from, to) in [
        ("unknown field ", "unknown property "),
        ("duplicate field ", "duplicate property "),
    ] {
        if let Some(rest) = out.strip_prefix(from) {
            out = format!("{to}{rest}");
        }
    }
    for (from, to) in [
        ("invalid type: map,", "invalid type: object,"),
        ("invalid type: sequence,", "invalid type: array,"),
        ("expected a map", "expected an object"),
        ("expected a sequence", "expected an array"),
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
        ("expected i64", "expected a whole number"),
        ("expected u16", "expected a port number (0-65535)"),
        ("expected a borrowed string", "expected a string"),
    ] {
        out = out.replace(from, to);
    }
    out
}

/// `build.args.FOO`, `mounts[2]`, `remoteEnv["A.B"]`: keys that are not plain names are quoted so
/// the path stays unambiguous.
fn property_name(segments: &[Segment]) -> String {
    let mut out = String::new();
    for segment in segments {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                let plain = !key.is_empty()
                    && key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                if plain {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(key);
                } else {
                    let quoted = serde_json::to_string(key).unwrap_or_else(|_| format!("{key:?}"));
                    out.push_str(&format!("[{quoted}]"));
                }
            }
            Segment::Unknown => out.push_str(".?"),
        }
    }
    out
}

/// Blank out `//` and `/* */` comments and trailing commas with spaces, keeping line breaks and
/// every byte offset. Returns the offset of an unterminated block comment as the error.
///
/// Only ASCII bytes are ever inspected or replaced outside comments; inside a comment every byte
/// (including all bytes of a multi-byte character) becomes a space, so the result stays UTF-8.
fn blank_jsonc(text: &str) -> std::result::Result<String, usize> {
    let mut bytes = text.as_bytes().to_vec();
    blank_comments(&mut bytes)?;
    blank_trailing_commas(&mut bytes);
    // Cannot fail (see above); losing exactness is better than panicking if it ever did.
    Ok(String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into()))
}

/// The index just past the string literal starting at `start` (a `"`), honouring `\` escapes.
/// An unterminated string runs to the end; serde_json reports it.
fn skip_string(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

fn blank_comments(bytes: &mut [u8]) -> std::result::Result<(), usize> {
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'"', _) => i = skip_string(bytes, i),
            (b'/', Some(b'/')) => {
                let end = bytes[i..]
                    .iter()
                    .position(|&b| b == b'\n' || b == b'\r')
                    .map_or(bytes.len(), |p| i + p);
                blank(&mut bytes[i..end]);
                i = end;
            }
            (b'/', Some(b'*')) => {
                let close = bytes[i + 2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .ok_or(i)?;
                let end = i + 2 + close + 2;
                blank(&mut bytes[i..end]);
                i = end;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

fn blank(bytes: &mut [u8]) {
    for b in bytes.iter_mut().filter(|b| **b != b'\n' && **b != b'\r') {
        *b = b' ';
    }
}

/// A `,` followed (after whitespace, and comments already blanked) by `}` or `]`.
fn blank_trailing_commas(bytes: &mut [u8]) {
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = skip_string(bytes, i),
            b',' => {
                let next = bytes[i + 1..].iter().find(|b| !b.is_ascii_whitespace());
                if matches!(next, Some(b'}') | Some(b']')) {
                    bytes[i] = b' ';
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let column = 1 + text
        .get(line_start..)
        .unwrap_or_default()
        .char_indices()
        .take_while(|(i, _)| line_start + i < offset)
        .count();
    (line, column)
}

/// serde_json counts columns in bytes; editors count characters.
fn serde_line_col(text: &str, line: usize, byte_column: usize) -> (usize, usize) {
    let Some(line_text) = text.split('\n').nth(line.saturating_sub(1)) else {
        return (line, byte_column);
    };
    let column = line_text
        .char_indices()
        .take_while(|(i, _)| *i < byte_column)
        .count();
    (line, column.max(1))
}

/// The byte offset where the value at `path` starts in `json` (comments already blanked), or
/// None if the text does not lead there (it is not well-formed up to that point).
fn locate(json: &str, path: &[Segment]) -> Option<usize> {
    let bytes = json.as_bytes();
    let mut at = skip_ws(bytes, 0);
    for segment in path {
        at = match (segment, bytes.get(at)?) {
            (Segment::Map { key }, b'{') => find_member(json, at, key)?,
            (Segment::Seq { index }, b'[') => find_element(bytes, at, *index)?,
            _ => return None,
        };
    }
    Some(at)
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// In the object at `open`, the start of the value of the last member named `key` (serde keeps
/// the last of duplicate keys in maps), or of the key itself if it has no value yet.
fn find_member(json: &str, open: usize, key: &str) -> Option<usize> {
    let bytes = json.as_bytes();
    let mut i = skip_ws(bytes, open + 1);
    let mut found = None;
    while bytes.get(i) == Some(&b'"') {
        let key_end = skip_string(bytes, i);
        let name: String = serde_json::from_str(json.get(i..key_end)?).ok()?;
        let colon = skip_ws(bytes, key_end);
        if bytes.get(colon) != Some(&b':') {
            return found.or((name == key).then_some(i));
        }
        let value = skip_ws(bytes, colon + 1);
        if name == key {
            found = Some(value);
        }
        i = skip_ws(bytes, skip_value(bytes, value)?);
        match bytes.get(i) {
            Some(b',') => i = skip_ws(bytes, i + 1),
            _ => break,
        }
    }
    found
}

fn find_element(bytes: &[u8], open: usize, index: usize) -> Option<usize> {
    let mut i = skip_ws(bytes, open + 1);
    for _ in 0..index {
        i = skip_ws(bytes, skip_value(bytes, i)?);
        if bytes.get(i) != Some(&b',') {
            return None;
        }
        i = skip_ws(bytes, i + 1);
    }
    matches!(bytes.get(i), Some(b) if *b != b']').then_some(i)
}

/// The index just past the value starting at `start`.
fn skip_value(bytes: &[u8], start: usize) -> Option<usize> {
    match bytes.get(start)? {
        b'"' => Some(skip_string(bytes, start)),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => {
                        i = skip_string(bytes, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = bytes[start..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())
                .unwrap_or(bytes.len() - start);
            Some(start + len)
        }
    }
}

/// A short description of the JSON value at `offset`: its kind, and its text if it is short.
fn describe_value_at(json: &str, offset: usize) -> Option<String> {
    let end = skip_value(json.as_bytes(), offset)?;
    let value: serde_json::Value = serde_json::from_str(json.get(offset..end)?).ok()?;
    Some(match value {
        serde_json::Value::Object(_) => "an object".into(),
        serde_json::Value::Array(_) => "an array".into(),
        serde_json::Value::Null => "null".into(),
        other => {
            let shown = other.to_string();
            if shown.chars().count() > 40 {
                let cut: String = shown.chars().take(37).collect();
                format!("{cut}...")
            } else {
                shown
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devcontainer::model::{LifecycleCommand, PortEntry};

    const FILE: &str = "devcontainer.json";

    fn ok(text: &str) -> DevContainer {
        match parse_str(text, Path::new(FILE)) {
            Ok(config) => config,
            Err(e) => panic!("expected {text:?} to parse, got: {e}"),
        }
    }

    /// (line, column, property, message) of a Config error.
    fn config_err(text: &str) -> (Option<usize>, Option<usize>, Option<String>, String) {
        match parse_str(text, Path::new(FILE)) {
            Err(Error::Config {
                file,
                line,
                column,
                property,
                message,
            }) => {
                assert_eq!(file, Path::new(FILE));
                (line, column, property, message)
            }
            other => panic!("expected a Config error for {text:?}, got {other:?}"),
        }
    }

    fn shown(text: &str) -> String {
        match parse_str(text, Path::new(FILE)) {
            Err(e) => e.to_string(),
            Ok(config) => panic!("expected an error, parsed {config:?}"),
        }
    }

    #[test]
    fn minimal_image_config() {
        let config = ok(r#"{"image": "debian:bookworm"}"#);
        assert_eq!(config.image.as_deref(), Some("debian:bookworm"));
    }

    #[test]
    fn typical_config_fields() {
        let config = ok(r#"{
            "name": "dev",
            "build": {"dockerfile": "Dockerfile", "context": "..", "args": {"V": "1"}},
            "forwardPorts": [3000, "db:5432"],
            "runArgs": ["--cap-drop=ALL"],
            "postCreateCommand": ["npm", "ci"],
            "remoteEnv": {"A": null, "B": "b"},
            "customizations": {"yolo": {"limits": {"cpus": 2, "memory": "4g"},
                               "firewall": {"allow": ["example.com"]}, "agent": "claude"}}
        }"#);
        let build = config.build.expect("build");
        assert_eq!(build.dockerfile.as_deref(), Some("Dockerfile"));
        assert_eq!(build.args.get("V").map(String::as_str), Some("1"));
        assert_eq!(
            config.forward_ports,
            vec![PortEntry::Number(3000), PortEntry::Text("db:5432".into())]
        );
        assert_eq!(
            config.post_create_command,
            Some(LifecycleCommand::Args(vec!["npm".into(), "ci".into()]))
        );
        assert_eq!(config.remote_env.get("A"), Some(&None));
        let yolo = config.customizations.and_then(|c| c.yolo).expect("yolo");
        assert_eq!(yolo.limits.cpus, Some(2.0));
        assert_eq!(yolo.firewall.allow, vec!["example.com".to_string()]);
        assert_eq!(yolo.agent.as_deref(), Some("claude"));
    }

    #[test]
    fn line_and_block_comments_are_ignored() {
        let config = ok("// header\n{\n  /* block\n     over lines */ \"image\": \"x\", // tail\n  \"name\": /* inline */ \"n\"\n}\n// end");
        assert_eq!(config.image.as_deref(), Some("x"));
        assert_eq!(config.name.as_deref(), Some("n"));
    }

    #[test]
    fn comment_markers_inside_strings_are_kept() {
        let config =
            ok(r#"{"image": "x", "name": "a // b /* c */ d", "remoteUser": "http://h/*"}"#);
        assert_eq!(config.name.as_deref(), Some("a // b /* c */ d"));
        assert_eq!(config.remote_user.as_deref(), Some("http://h/*"));
    }

    #[test]
    fn escapes_do_not_end_strings_early() {
        // `\"` does not close the string; `\\` before the closing quote does not escape it.
        let config = ok(
            r#"{"image": "x", "name": "q\" // not a comment", "remoteUser": "C:\\" // comment
        }"#,
        );
        assert_eq!(config.name.as_deref(), Some("q\" // not a comment"));
        assert_eq!(config.remote_user.as_deref(), Some("C:\\"));
    }

    #[test]
    fn trailing_commas_are_accepted() {
        let config = ok("{\"image\": \"x\", \"runArgs\": [\"a\", \"b\",], \"build\": {\"args\": {\"A\": \"1\",},},\n // c\n}");
        assert_eq!(config.run_args, vec!["a".to_string(), "b".to_string()]);
        // Also with a comment between the comma and the bracket.
        let config = ok("{\"image\": \"x\", \"runArgs\": [\"a\", /* c */\n // d\n ]}");
        assert_eq!(config.run_args, vec!["a".to_string()]);
    }

    #[test]
    fn commas_and_brackets_inside_strings_are_kept() {
        let config = ok(r#"{"image": "x", "name": "a,}", "runArgs": ["b,]"]}"#);
        assert_eq!(config.name.as_deref(), Some("a,}"));
        assert_eq!(config.run_args, vec!["b,]".to_string()]);
    }

    #[test]
    fn byte_order_mark_is_skipped_and_not_counted_in_columns() {
        assert_eq!(ok("\u{feff}{\"image\": \"x\"}").image.as_deref(), Some("x"));
        let (line, column, _, _) = config_err("\u{feff}{\"image\": \"x\" \"name\": \"n\"}");
        assert_eq!((line, column), (Some(1), Some(15)));
    }

    #[test]
    fn missing_comma_reports_line_and_column() {
        let (line, column, property, message) =
            config_err("{\n  \"image\": \"x\"\n  \"name\": \"y\"\n}");
        assert_eq!((line, column, property), (Some(3), Some(3), None));
        assert_eq!(
            message,
            "expected `,` or `}`; is a comma missing before this?"
        );
    }

    #[test]
    fn unclosed_brace_is_reported_at_the_end() {
        let (line, column, _, message) = config_err("{\n  \"image\": \"x\",\n  \"name\": \"y\"\n");
        assert_eq!((line, column), (Some(4), Some(1)));
        assert_eq!(
            message,
            "the file ends before this object is closed; is a `}` missing?"
        );
    }

    #[test]
    fn unclosed_block_comment_points_at_its_start() {
        let (line, column, _, message) = config_err("{\"image\": \"x\"\n  /* open");
        assert_eq!((line, column), (Some(2), Some(3)));
        assert_eq!(message, "this /* comment is never closed with */");
    }

    #[test]
    fn text_after_the_object_is_refused() {
        let (line, column, _, message) = config_err("{\"image\": \"x\"} x");
        assert_eq!((line, column), (Some(1), Some(16)));
        assert_eq!(
            message,
            "unexpected text after the end of the top-level object"
        );
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        // "é" is two bytes and the comment holds a four-byte emoji; the `1` is character 24.
        let (line, column, _, _) = config_err("{\"image\": \"é\", /* 🦀 */ 1}");
        assert_eq!((line, column), (Some(1), Some(24)));
    }

    #[test]
    fn wrong_port_entry_names_the_element_and_where_it_starts() {
        let text = "{\n  \"image\": \"x\",\n  \"forwardPorts\": [\"x\", {}]\n}";
        assert_eq!(
            shown(text),
            "devcontainer.json:3:25: \"forwardPorts[1]\": expected a port number or a \
             \"host:port\" string, found an object"
        );
        let (line, column, property, message) =
            config_err("{\"image\": \"x\", \"forwardPorts\": [70000]}");
        assert_eq!((line, column), (Some(1), Some(33)));
        assert_eq!(property.as_deref(), Some("forwardPorts[0]"));
        assert_eq!(
            message,
            "expected a port number or a \"host:port\" string, found 70000"
        );
    }

    #[test]
    fn run_args_as_a_string_is_a_type_error() {
        let (line, column, property, message) =
            config_err("{\n  \"image\": \"x\",\n  \"runArgs\": \"--privileged\"\n}");
        assert_eq!((line, column), (Some(3), Some(14)));
        assert_eq!(property.as_deref(), Some("runArgs"));
        assert_eq!(
            message,
            "invalid type: string \"--privileged\", expected an array"
        );
    }

    #[test]
    fn build_arg_must_be_a_string() {
        let (line, column, property, message) =
            config_err("{\"build\": {\"dockerfile\": \"D\", \"args\": {\"A\": 1}}}");
        assert_eq!((line, column), (Some(1), Some(45)));
        assert_eq!(property.as_deref(), Some("build.args.A"));
        assert_eq!(message, "invalid type: integer `1`, expected a string");
    }

    #[test]
    fn struct_and_number_wording_is_json_not_rust() {
        let (_, _, property, message) = config_err(r#"{"image": "x", "build": "Dockerfile"}"#);
        assert_eq!(property.as_deref(), Some("build"));
        assert_eq!(
            message,
            "invalid type: string \"Dockerfile\", expected an object"
        );
        let (_, _, property, message) =
            config_err(r#"{"image": "x", "customizations": {"yolo": {"limits": {"cpus": "2"}}}}"#);
        assert_eq!(property.as_deref(), Some("customizations.yolo.limits.cpus"));
        assert_eq!(message, "invalid type: string \"2\", expected a number");
        let (_, _, _, message) = config_err(r#"{"image": "x", "capAdd": {}}"#);
        assert_eq!(message, "invalid type: object, expected an array");
    }

    #[test]
    fn keys_that_are_not_names_are_quoted_in_the_property() {
        let (_, _, property, _) = config_err(r#"{"image": "x", "remoteEnv": {"A.B": 1}}"#);
        assert_eq!(property.as_deref(), Some(r#"remoteEnv["A.B"]"#));
    }

    #[test]
    fn untagged_enum_messages_never_leak_serde_wording() {
        let cases = [
            r#"{"image": "x", "mounts": ["a", {"type": "bind"}]}"#,
            r#"{"image": "x", "postCreateCommand": 5}"#,
            r#"{"image": "x", "postStartCommand": {"a": 5}}"#,
            r#"{"image": "x", "appPort": [true]}"#,
            r#"{"image": "x", "build": {"cacheFrom": 1}}"#,
            r#"{"image": "x", "forwardPorts": [-1]}"#,
        ];
        for text in cases {
            let (line, column, property, message) = config_err(text);
            assert!(line.is_some() && column.is_some(), "{text}");
            assert!(property.is_some(), "{text}");
            assert!(message.starts_with("expected "), "{text}: {message}");
            assert!(!message.contains("did not match"), "{text}: {message}");
            assert!(!message.contains("untagged"), "{text}: {message}");
        }
        let (_, _, property, message) = config_err(cases[0]);
        assert_eq!(property.as_deref(), Some("mounts[1]"));
        assert_eq!(
            message,
            "expected a mount string (\"source=...,target=...,type=...\") or an object with type, \
             source and target, found an object with a value that does not fit"
        );
        let (_, _, property, message) = config_err(cases[1]);
        assert_eq!(property.as_deref(), Some("postCreateCommand"));
        assert_eq!(
            message,
            "expected a command string, an array of arguments, or an object of named commands, \
             found 5"
        );
    }

    #[test]
    fn unknown_yolo_customization_is_named() {
        let (line, column, property, message) =
            config_err(r#"{"image": "x", "customizations": {"yolo": {"limits": {}, "bogus": 1}}}"#);
        assert_eq!(property.as_deref(), Some("customizations.yolo.bogus"));
        assert_eq!(
            message,
            "unknown property `bogus`, expected one of `limits`, `firewall`, `agent`, `http`"
        );
        assert_eq!((line, column), (Some(1), Some(67)));
        let (_, _, property, _) = config_err(
            r#"{"image": "x", "customizations": {"yolo": {"firewall": {"allowed": []}}}}"#,
        );
        assert_eq!(
            property.as_deref(),
            Some("customizations.yolo.firewall.allowed")
        );
    }

    #[test]
    fn other_customizations_and_unknown_properties_are_ignored() {
        let config = ok(r#"{
            "image": "x",
            "hostRequirements": {"gpu": true, "cpus": 2},
            "otherPortsAttributes": {"onAutoForward": "silent"},
            "customizations": {"vscode": {"extensions": ["rust-lang.rust-analyzer"]},
                               "codespaces": {"openFiles": ["README.md"]}}
        }"#);
        let customizations = config.customizations.expect("customizations");
        assert_eq!(customizations.yolo, None);
    }

    #[test]
    fn duplicate_property_is_named() {
        let (line, column, property, message) = config_err(r#"{"image": "x", "image": "y"}"#);
        assert_eq!(property.as_deref(), Some("image"));
        assert_eq!(message, "duplicate property `image`");
        assert_eq!((line, column), (Some(1), Some(25)));
    }

    #[test]
    fn features_are_an_object_of_options() {
        ok(r#"{"image": "x", "features": {}}"#);
        ok(r#"{"image": "x", "features": null}"#);
        let config = ok(
            r#"{"image": "x", "features": {"ghcr.io/devcontainers/features/node:1": {}, "./local": {"v": "1"}},
                "overrideFeatureInstallOrder": ["./local"]}"#,
        );
        assert_eq!(config.features.unwrap().as_object().unwrap().len(), 2);
        assert_eq!(
            config.override_feature_install_order,
            Some(vec!["./local".to_string()])
        );
        let (_, _, property, message) = config_err(r#"{"image": "x", "features": []}"#);
        assert_eq!(property.as_deref(), Some("features"));
        assert!(message.starts_with("expected an object"), "{message}");
    }

    #[test]
    fn features_with_compose_are_read() {
        let config =
            ok(r#"{"dockerComposeFile": "c.yml", "service": "app", "features": {"./f": {}}}"#);
        assert!(config.features.is_some());
    }

    #[test]
    fn a_compose_config_needs_the_files_and_the_service() {
        let one = ok(r#"{"dockerComposeFile": "compose.yml", "service": "app"}"#);
        assert_eq!(one.docker_compose_file.unwrap().0, ["compose.yml"]);
        let many = ok(
            r#"{"dockerComposeFile": ["a.yml", "b.yml"], "service": "app", "runServices": ["db"]}"#,
        );
        assert_eq!(many.docker_compose_file.unwrap().0, ["a.yml", "b.yml"]);
        assert_eq!(many.run_services.unwrap(), ["db"]);
        let (_, _, property, message) = config_err(r#"{"dockerComposeFile": "a.yml"}"#);
        assert_eq!(property.as_deref(), Some("service"));
        assert!(message.contains("needs \"service\""), "{message}");
        let (_, _, property, _) = config_err(r#"{"dockerComposeFile": [], "service": "app"}"#);
        assert_eq!(property.as_deref(), Some("dockerComposeFile"));
        // A stray `service` (or `runServices`) is ignored with a warning (`properties`), as the
        // reference CLI ignores it.
        assert!(!ok(r#"{"image": "x", "service": "app"}"#)
            .warnings
            .is_empty());
        assert!(!ok(r#"{"image": "x", "runServices": ["db"]}"#)
            .warnings
            .is_empty());
    }

    #[test]
    fn something_to_run_is_required() {
        for text in [
            "{}",
            r#"{"name": "n"}"#,
            r#"{"build": {"context": ".."}}"#,
            r#"{"image": "  "}"#,
        ] {
            let (line, column, property, message) = config_err(text);
            assert_eq!((line, column, property), (None, None, None), "{text}");
            assert!(
                message.starts_with("nothing to run: set \"image\""),
                "{message}"
            );
            assert!(message.contains("\"build.dockerfile\""), "{message}");
        }
        ok(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
        ok(r#"{"dockerFile": "Dockerfile"}"#);
    }

    #[test]
    fn empty_and_non_object_files() {
        for text in [
            "",
            "  \n",
            "// only a comment\n/* and another */",
            "\u{feff}",
        ] {
            let (line, _, _, message) = config_err(text);
            assert_eq!(line, None);
            assert!(
                message.starts_with("the file is empty"),
                "{text:?}: {message}"
            );
        }
        let (line, column, _, message) = config_err("\n  [ {\"image\": \"x\"} ]");
        assert_eq!((line, column), (Some(2), Some(3)));
        assert_eq!(message, "expected a JSON object ({ ... }) at the top level");
        assert_eq!(
            config_err("\"x\"").3,
            "expected a JSON object ({ ... }) at the top level"
        );
    }

    #[test]
    fn parse_file_reads_and_reports_the_path() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("devcontainer.json");
        std::fs::write(&path, "{\"image\": \"x\", // c\n}").unwrap();
        assert_eq!(parse_file(&path).unwrap().image.as_deref(), Some("x"));

        std::fs::write(&path, b"{\n \"name\": \"\xff\"}").unwrap();
        match parse_file(&path) {
            Err(Error::Config {
                file,
                line,
                column,
                message,
                ..
            }) => {
                assert_eq!(file, path);
                assert_eq!((line, column), (Some(2), Some(11)));
                assert_eq!(message, "the file is not valid UTF-8; save it as UTF-8");
            }
            other => panic!("expected a Config error, got {other:?}"),
        }

        std::fs::write(&path, b"\xef\xbb\xbf{\"name\": \"\xff\"}").unwrap();
        match parse_file(&path) {
            Err(Error::Config { line, column, .. }) => {
                assert_eq!((line, column), (Some(1), Some(11)))
            }
            other => panic!("expected a Config error, got {other:?}"),
        }

        let missing = dir.path().join("missing.json");
        assert!(matches!(parse_file(&missing), Err(Error::Io { path, .. }) if path == missing));
    }

    #[test]
    fn arbitrary_garbage_never_panics() {
        let inputs = [
            "{",
            "}",
            "{\"",
            "{\"a",
            "{\"a\":",
            "{\"a\":\"\\",
            "/",
            "/*",
            "*/",
            "{/",
            "{,}",
            "[,]",
            "{\"image\":\"x\",,}",
            "\"\\",
            "{\"forwardPorts\":[",
            "{\"forwardPorts\":[{",
            "\u{0}",
            "{\"build\":{\"args\":{\"a\":[}}}",
            "{\"mounts\":[\"é\",{\"type\":\"é\"",
            "🦀",
        ];
        for text in inputs {
            assert!(parse_str(text, Path::new(FILE)).is_err(), "{text:?}");
        }
    }
}
