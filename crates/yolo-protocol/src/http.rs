//! What the guard's HTTP proxy is told: per-host method and path rules, the git push rule of a
//! forge, the credentials it puts in place of their stand-ins, and which hosts it inspects at
//! all. Pure: the grammar, its matching and the stand-in shape; no sockets, no randomness of its
//! own (the caller hands in the random bytes), no real credential values (those reach the guard
//! over its control socket and live in its memory only).
//!
//! Grammar of a rule: `METHOD /path-pattern`, where METHOD is an HTTP method or `*` (any), and
//! the path pattern is `/`-separated segments: `*` inside a segment matches any characters but
//! `/`, a segment that is `**` matches any number of segments (none included), anything else
//! matches itself exactly. The query string is never part of the match.
//!
//! Not here: the decision over a real request (the guard's `proxy::rules`), which also
//! normalizes the request's path with [`normalize_path`] before matching.

use crate::allowlist::{Pattern, Ports};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// The refs a push may update when the user names none: the agent's own branches.
pub const DEFAULT_PUSH_REFS: &str = "refs/heads/yolo/**";

/// A `METHOD /path-pattern` rule (`GET /**`, `POST /v1/messages`, `* /repos/o/r/**`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRule {
    /// An uppercase method (`GET`), or `*` for any.
    pub method: String,
    pub path: PathPattern,
}

impl HttpRule {
    /// Whether `method` and `path` (a normalized path, without its query) match this rule.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        (self.method == "*" || self.method == method) && self.path.matches(path)
    }
}

impl fmt::Display for HttpRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

impl FromStr for HttpRule {
    type Err = RuleError;

    fn from_str(text: &str) -> Result<HttpRule, RuleError> {
        let error = |problem| RuleError {
            rule: text.into(),
            problem,
        };
        let mut words = text.split_whitespace();
        let (Some(method), Some(path), None) = (words.next(), words.next(), words.next()) else {
            return Err(error(RuleProblem::Shape));
        };
        let method = if method == "*" {
            method.to_string()
        } else if method.bytes().all(is_token_byte) {
            method.to_ascii_uppercase()
        } else {
            return Err(error(RuleProblem::Method {
                method: method.into(),
            }));
        };
        let path = path.parse::<PathPattern>().map_err(error)?;
        Ok(HttpRule { method, path })
    }
}

/// The characters of an HTTP token (RFC 9110 `tchar`): what a method is made of.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A path pattern: see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern {
    text: String,
}

impl PathPattern {
    /// Whether the normalized `path` (starting with `/`, no query) matches.
    pub fn matches(&self, path: &str) -> bool {
        let pattern: Vec<&str> = self.text[1..].split('/').collect();
        let Some(path) = path.strip_prefix('/') else {
            return false;
        };
        let path: Vec<&str> = path.split('/').collect();
        segments_match(&pattern, &path)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for PathPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for PathPattern {
    type Err = RuleProblem;

    fn from_str(text: &str) -> Result<PathPattern, RuleProblem> {
        if !text.starts_with('/') {
            return Err(RuleProblem::NoSlash);
        }
        if text.contains(['?', '#']) {
            return Err(RuleProblem::Query);
        }
        for segment in text[1..].split('/') {
            if segment.contains("**") && segment != "**" {
                return Err(RuleProblem::DoubleStar {
                    segment: segment.into(),
                });
            }
            if segment == "." || segment == ".." {
                return Err(RuleProblem::DotSegment);
            }
            if let Some(found) = segment
                .chars()
                .find(|c| c.is_whitespace() || c.is_control())
            {
                return Err(RuleProblem::Character { found });
            }
        }
        Ok(PathPattern { text: text.into() })
    }
}

/// `pattern` segments against `path` segments: `**` takes any number, `*` globs within one.
fn segments_match(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|skip| segments_match(rest, &path[skip..])),
        Some((first, rest)) => path.split_first().is_some_and(|(segment, tail)| {
            glob_match(first, segment) && segments_match(rest, tail)
        }),
    }
}

/// `*` matches any run of characters (within one segment: the caller split on `/`).
fn glob_match(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            let Some(rest) = text.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .filter(|&i| rest.is_char_boundary(i))
                .any(|i| glob_match(tail, &rest[i..]))
        }
    }
}

/// Whether a ref name (`refs/heads/yolo/x`) matches a ref pattern (`refs/heads/yolo/**`), with
/// the path grammar: `*` within one component, `**` any number of components.
pub fn ref_matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<&str> = pattern.split('/').collect();
    let name: Vec<&str> = name.split('/').collect();
    segments_match(&pattern, &name)
}

/// A request path made comparable with the rules, or why it cannot be: percent-encoded
/// unreserved characters are decoded (`/v1/%6Dessages` is `/v1/messages` to every server), and
/// what servers disagree about is refused rather than guessed: `.`/`..` segments (plain or
/// encoded), an encoded `/` or `\`, a backslash, a NUL. The query (`?...`) is cut.
pub fn normalize_path(path_and_query: &str) -> Result<String, String> {
    let path = path_and_query
        .split_once('?')
        .map_or(path_and_query, |(p, _)| p);
    if !path.starts_with('/') {
        return Err(format!(
            "the request target {path:?} is not an absolute path"
        ));
    }
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let decoded = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("the path {path:?} has a broken percent-encoding"))?;
            if decoded.is_ascii_alphanumeric() || b"-._~".contains(&decoded) {
                out.push(decoded as char);
            } else if matches!(decoded, b'/' | b'\\' | 0) {
                return Err(format!(
                    "the path {path:?} encodes a separator or NUL (%{:02X}), which servers read differently",
                    decoded
                ));
            } else {
                // Reserved characters stay encoded: decoding them would change the meaning.
                out.push_str(&path[i..i + 3].to_ascii_uppercase());
            }
            i += 3;
            continue;
        }
        if b == b'\\' || b == 0 {
            return Err(format!(
                "the path {path:?} holds a backslash or NUL, which servers read differently"
            ));
        }
        // Multi-byte UTF-8 is copied whole (the path is a &str, so boundaries are valid).
        let len = utf8_len(b);
        out.push_str(&path[i..i + len]);
        i += len;
    }
    if out[1..].split('/').any(|s| s == "." || s == "..") {
        return Err(format!(
            "the path {path:?} has a . or .. segment, which servers resolve differently"
        ));
    }
    Ok(out)
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// Why a rule is refused. Its message names the rule as given and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    pub rule: String,
    pub problem: RuleProblem,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?}: {}; a rule is `METHOD /path`, like \"GET /**\", \"POST /v1/messages\" or \"* /repos/owner/repo/**\"",
            self.rule, self.problem
        )
    }
}

impl std::error::Error for RuleError {}

/// What is wrong with a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleProblem {
    /// Not two words.
    Shape,
    Method {
        method: String,
    },
    NoSlash,
    Query,
    DoubleStar {
        segment: String,
    },
    DotSegment,
    Character {
        found: char,
    },
}

impl fmt::Display for RuleProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleProblem::Shape => f.write_str("expected a method and a path separated by a space"),
            RuleProblem::Method { method } => {
                write!(f, "{method:?} is not an HTTP method (or * for any)")
            }
            RuleProblem::NoSlash => f.write_str("the path must start with /"),
            RuleProblem::Query => f.write_str(
                "the path cannot hold ? or #: the query string is not part of the match",
            ),
            RuleProblem::DoubleStar { segment } => write!(
                f,
                "** must be a whole segment (/a/**/b), not part of {segment:?}; use * within a segment"
            ),
            RuleProblem::DotSegment => {
                f.write_str(". and .. segments never match (requests with them are refused)")
            }
            RuleProblem::Character { found } => write!(f, "invalid character {found:?}"),
        }
    }
}

/// The rules of one host (`[http."HOST"]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostRules {
    /// An allowlist pattern (`api.example.test`, `*.example.test`, `example.test:8443`).
    #[serde(with = "pattern_text")]
    pub host: Pattern,
    /// The first matching rule forwards; no match refuses. Empty: every request is refused but
    /// the pushes `git_push` lets through.
    #[serde(default, with = "rule_texts")]
    pub allow: Vec<HttpRule>,
    /// The repository's rules for this host (`customizations.yolo.http`), which may narrow what
    /// `allow` lets through and never widen it: when set, a request must match one of these
    /// too. Empty: every request is refused.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "narrow_texts"
    )]
    pub narrow: Option<Vec<HttpRule>>,
    /// On a forge: the only repository git may push to, and the refs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_push: Option<GitPush>,
}

/// Where git (smart HTTP, and the forge's API: see the guard's `proxy::git`) may write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GitPush {
    /// The repository's own `origin` as a path on the forge: `/owner/repo` (no `.git`).
    pub repository: String,
    /// Ref patterns a push may create, update or delete ([`ref_matches`]).
    #[serde(default = "default_push_refs")]
    pub refs: Vec<String>,
}

fn default_push_refs() -> Vec<String> {
    vec![DEFAULT_PUSH_REFS.to_string()]
}

impl GitPush {
    /// A push rule for `repository` (`/owner/repo`, `owner/repo` or with `.git`) and the
    /// default refs.
    pub fn new(repository: &str) -> GitPush {
        GitPush {
            repository: repository_path(repository),
            refs: default_push_refs(),
        }
    }

    /// Whether `path` (`/owner/repo`, `.git` or not, any case) is this rule's repository.
    /// Forges (GitHub, GitLab) treat owner and repository names without regard to case.
    pub fn is_origin(&self, path: &str) -> bool {
        repository_path(path).eq_ignore_ascii_case(&repository_path(&self.repository))
    }

    /// Whether a push may touch `name` (`refs/heads/yolo/x`).
    pub fn allows_ref(&self, name: &str) -> bool {
        self.refs.iter().any(|p| ref_matches(p, name))
    }
}

/// `/owner/repo` from `owner/repo`, `/owner/repo.git`, `/owner/repo/`.
fn repository_path(text: &str) -> String {
    let trimmed = text.trim_matches('/');
    let trimmed = trimmed.strip_suffix(".git").unwrap_or(trimmed);
    format!("/{trimmed}")
}

/// A credential the guard holds for the agent (`[credentials.NAME]`): where its real value may
/// go and how it travels. The real value is not here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CredentialSpec {
    pub name: String,
    /// Where the real value may go (allowlist patterns).
    #[serde(with = "pattern_texts")]
    pub hosts: Vec<Pattern>,
    /// The header that carries it, lowercase (`x-api-key`, `authorization`).
    pub header: String,
    /// What precedes the value in the header (`Bearer `); may be empty.
    #[serde(default)]
    pub value_prefix: String,
    /// What the agent holds instead (without the prefix): random per session.
    pub stand_in: String,
}

/// The HTTP part of the guard's config (`GuardConfig::http`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpConfig {
    /// `[firewall] inspect = "all"`: every allowed HTTPS host goes through the proxy.
    #[serde(default)]
    pub inspect_all: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostRules>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<CredentialSpec>,
}

impl HttpConfig {
    /// Nothing inspected: the proxy has nothing to do.
    pub fn is_empty(&self) -> bool {
        !self.inspect_all && self.hosts.is_empty() && self.credentials.is_empty()
    }

    /// Whether connections to `name` go through the proxy: a credential or a HostRules names
    /// it, a forge's git push rule covers its API host ([`forge_api_host`]), or `inspect_all`.
    pub fn inspects(&self, name: &str) -> bool {
        self.inspect_all
            || self
                .credentials
                .iter()
                .any(|c| c.hosts.iter().any(|h| host_matches(h, name, None)))
            || self.hosts.iter().any(|r| {
                host_matches(&r.host, name, None)
                    || (r.git_push.is_some()
                        && forge_of_api(name)
                            .is_some_and(|forge| host_matches(&r.host, forge, None)))
            })
    }
}

/// The API host of a forge whose push rules also bind its API: GitHub only for now.
pub fn forge_api_host(forge: &str) -> Option<&'static str> {
    match forge {
        "github.com" => Some("api.github.com"),
        _ => None,
    }
}

/// The forge whose API `host` is ([`forge_api_host`] the other way round).
pub fn forge_of_api(host: &str) -> Option<&'static str> {
    match host {
        "api.github.com" => Some("github.com"),
        _ => None,
    }
}

/// Whether an allowlist pattern matches a host name (or address literal) and, if given, port.
/// Names compare without case and without a trailing dot; `*.example.com` matches subdomains at
/// any depth, not `example.com` itself (as in the allowlist).
pub fn host_matches(pattern: &Pattern, host: &str, port: Option<u16>) -> bool {
    let port_ok = match (pattern.ports(), port) {
        (Ports::Only(ports), Some(port)) => ports.contains(&port),
        _ => true,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let name_ok = match pattern {
        Pattern::Exact { name, .. } => *name == host,
        Pattern::Wildcard { suffix, .. } => host
            .strip_suffix(suffix.as_str())
            .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        Pattern::Network { net, .. } => host.parse::<IpAddr>().is_ok_and(|a| net.contains(&a)),
    };
    port_ok && name_ok
}

/// The prefixes SDKs check, longest first so `sk-ant-api03-` wins over `sk-`.
pub const KNOWN_PREFIXES: &[&str] = &[
    "sk-ant-api03-",
    "sk-ant-oat01-",
    "github_pat_",
    "sk-proj-",
    "ghp_",
    "gho_",
    "AIza",
    "sk-",
];

/// The fewest random characters a stand-in has: a short one could turn up in a request by
/// chance and be taken for misuse.
pub const MIN_STAND_IN_RANDOM: usize = 24;

/// How many random bytes [`stand_in_for`] needs for a value shaped like `real`.
pub fn stand_in_random_len(real: &str) -> usize {
    let prefix = known_prefix(real).len();
    2 * real.len().saturating_sub(prefix).max(MIN_STAND_IN_RANDOM)
}

/// A stand-in shaped like `real`: its known prefix (`sk-ant-api03-`, `ghp_`, ... — SDKs check
/// them), then random letters and digits up to the real value's length (at least
/// [`MIN_STAND_IN_RANDOM`]). Only letters and digits: every format yolo knows accepts them, and
/// the stand-in says nothing about which characters the real value has. `random` must hold
/// [`stand_in_random_len`] bytes (two per character, so the modulo bias is 2^-10); `None` if
/// it holds fewer.
pub fn stand_in_for(real: &str, random: &[u8]) -> Option<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let prefix = known_prefix(real);
    let count = real
        .len()
        .saturating_sub(prefix.len())
        .max(MIN_STAND_IN_RANDOM);
    let random = random.get(..2 * count)?;
    let mut out = String::with_capacity(prefix.len() + count);
    out.push_str(prefix);
    for pair in random.chunks_exact(2) {
        let n = u16::from_le_bytes([pair[0], pair[1]]) as usize;
        out.push(ALPHABET[n % ALPHABET.len()] as char);
    }
    Some(out)
}

fn known_prefix(real: &str) -> &'static str {
    KNOWN_PREFIXES
        .iter()
        .find(|p| real.starts_with(**p))
        .copied()
        .unwrap_or("")
}

/// `HOST METHOD /path` (what [`allow_hint`] writes): the host and the rule.
pub fn parse_host_rule(text: &str) -> Result<(String, HttpRule), String> {
    let shape = "give HOST METHOD /path, e.g. 'api.example.com POST /v1/files'";
    let (host, rule) = text
        .trim()
        .split_once(char::is_whitespace)
        .ok_or_else(|| format!("{text:?}: {shape}"))?;
    let host = host.trim().to_ascii_lowercase();
    host.parse::<Pattern>()
        .map_err(|e| format!("{text:?}: the host: {e}; {shape}"))?;
    let rule = rule
        .trim()
        .parse::<HttpRule>()
        .map_err(|e| format!("{text:?}: {e}"))?;
    Ok((host, rule))
}

/// The `yolo allow` that would open a refused request, for its 403 body and the audit log.
pub fn allow_hint(host: &str, method: &str, path: &str) -> String {
    let rule = format!("{host} {method} {path}");
    format!("yolo allow --http '{}'", rule.replace('\'', "'\\''"))
}

/// `Pattern` as its text in the JSON config.
mod pattern_text {
    use super::*;

    pub fn serialize<S: Serializer>(pattern: &Pattern, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(pattern)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Pattern, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

mod pattern_texts {
    use super::*;

    pub fn serialize<S: Serializer>(patterns: &[Pattern], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(patterns.iter().map(Pattern::to_string))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Pattern>, D::Error> {
        let texts = Vec::<String>::deserialize(d)?;
        texts
            .iter()
            .map(|t| t.parse().map_err(serde::de::Error::custom))
            .collect()
    }
}

mod rule_texts {
    use super::*;

    pub fn serialize<S: Serializer>(rules: &[HttpRule], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(rules.iter().map(HttpRule::to_string))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<HttpRule>, D::Error> {
        let texts = Vec::<String>::deserialize(d)?;
        texts
            .iter()
            .map(|t| t.parse().map_err(serde::de::Error::custom))
            .collect()
    }
}

/// `Option<Vec<HttpRule>>` as an optional list of rule texts.
mod narrow_texts {
    use super::*;

    pub fn serialize<S: Serializer>(
        rules: &Option<Vec<HttpRule>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match rules {
            Some(rules) => s.collect_seq(rules.iter().map(HttpRule::to_string)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<HttpRule>>, D::Error> {
        let texts = Option::<Vec<String>>::deserialize(d)?;
        texts
            .map(|texts| {
                texts
                    .iter()
                    .map(|t| t.parse().map_err(serde::de::Error::custom))
                    .collect()
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> HttpRule {
        text.parse().unwrap()
    }

    #[test]
    fn rules_parse_and_print_in_their_normal_form() {
        let r = rule("get   /v1/messages");
        assert_eq!(r.method, "GET");
        assert_eq!(r.to_string(), "GET /v1/messages");
        assert_eq!(rule("* /repos/o/r/**").to_string(), "* /repos/o/r/**");
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        let cases = [
            ("GET", "expected a method and a path"),
            ("GET /a /b", "expected a method and a path"),
            ("G(T /a", "\"G(T\" is not an HTTP method"),
            ("GET a/b", "must start with /"),
            ("GET /a?x=1", "query string is not part of the match"),
            ("GET /a/b**", "** must be a whole segment"),
            ("GET /a/../b", ". and .. segments never match"),
        ];
        for (text, message) in cases {
            let err = text.parse::<HttpRule>().unwrap_err().to_string();
            assert!(err.starts_with(&format!("{text:?}: ")), "{err}");
            assert!(err.contains(message), "{text}: {err}");
            assert!(err.contains("\"GET /**\""), "{err}");
        }
    }

    #[test]
    fn a_star_matches_within_one_segment_and_two_stars_any_number() {
        let r = rule("GET /repos/*/r/**");
        assert!(r.matches("GET", "/repos/o/r"));
        assert!(r.matches("GET", "/repos/o/r/"));
        assert!(r.matches("GET", "/repos/o/r/a/b/c"));
        assert!(!r.matches("GET", "/repos/o/x/r"));
        assert!(!r.matches("GET", "/repos/r"));
        assert!(!r.matches("POST", "/repos/o/r/a"));
        assert!(rule("* /a").matches("DELETE", "/a"));
        assert!(!rule("GET /a").matches("GET", "/a/b"));
        assert!(!rule("GET /a").matches("GET", "/ab"));
        assert!(rule("GET /v1/*.json").matches("GET", "/v1/x.json"));
        assert!(!rule("GET /v1/*.json").matches("GET", "/v1/x/y.json"));
        assert!(rule("GET /a/**/z").matches("GET", "/a/z"));
        assert!(rule("GET /a/**/z").matches("GET", "/a/b/c/z"));
        assert!(!rule("GET /a/**/z").matches("GET", "/a/b/c/y"));
        assert!(rule("GET /**").matches("GET", "/"));
        assert!(!rule("GET /**").matches("GET", "relative"));
    }

    #[test]
    fn a_request_path_is_normalized_or_refused_when_servers_could_disagree() {
        assert_eq!(
            normalize_path("/v1/messages?beta=true").unwrap(),
            "/v1/messages"
        );
        assert_eq!(normalize_path("/v1/%6Dessages").unwrap(), "/v1/messages");
        assert_eq!(normalize_path("/a%3fb").unwrap(), "/a%3Fb");
        assert_eq!(normalize_path("/caf\u{e9}").unwrap(), "/caf\u{e9}");
        for bad in [
            "/a/../admin",
            "/a/%2e%2E/admin",
            "/a/./b",
            "/a%2Fb",
            "/a%5cb",
            "/a\\b",
            "/a%00",
            "/a%zz",
            "/a%2",
            "*",
            "example.com:443",
        ] {
            assert!(normalize_path(bad).is_err(), "{bad}");
        }
        // An encoded dot segment is refused, so it cannot slip past a rule to another path.
        let r = rule("GET /repos/o/r/**");
        assert!(normalize_path("/repos/o/r/%2e%2e/%2e%2e/x/y").is_err());
        assert!(r.matches("GET", &normalize_path("/repos/o/%72/issues").unwrap()));
    }

    #[test]
    fn push_refs_and_origin_match_as_documented() {
        let push = GitPush::new("Owner/Repo.git");
        assert_eq!(push.repository, "/Owner/Repo");
        assert_eq!(push.refs, vec!["refs/heads/yolo/**".to_string()]);
        assert!(push.is_origin("/owner/repo"));
        assert!(push.is_origin("/OWNER/repo.git"));
        assert!(!push.is_origin("/owner/repo2"));
        assert!(!push.is_origin("/other/repo"));
        assert!(push.allows_ref("refs/heads/yolo/x"));
        assert!(push.allows_ref("refs/heads/yolo/a/b"));
        assert!(!push.allows_ref("refs/heads/main"));
        assert!(!push.allows_ref("refs/heads/yolox"));
        assert!(!push.allows_ref("refs/tags/yolo/x"));
        assert!(ref_matches("refs/heads/*", "refs/heads/main"));
        assert!(!ref_matches("refs/heads/*", "refs/heads/a/b"));
    }

    #[test]
    fn host_patterns_match_names_addresses_and_ports() {
        let p = |t: &str| t.parse::<Pattern>().unwrap();
        assert!(host_matches(
            &p("api.example.test"),
            "API.example.test.",
            Some(443)
        ));
        assert!(!host_matches(&p("api.example.test"), "example.test", None));
        assert!(host_matches(&p("*.example.test"), "a.b.example.test", None));
        assert!(!host_matches(&p("*.example.test"), "example.test", None));
        assert!(!host_matches(&p("*.example.test"), "badexample.test", None));
        assert!(host_matches(
            &p("example.test:8443"),
            "example.test",
            Some(8443)
        ));
        assert!(!host_matches(
            &p("example.test:8443"),
            "example.test",
            Some(443)
        ));
        assert!(host_matches(&p("10.0.0.0/8"), "10.1.2.3", Some(443)));
        assert!(host_matches(&p("2001:db8::/32"), "[2001:db8::1]", None));
        assert!(!host_matches(&p("10.0.0.0/8"), "example.test", None));
    }

    fn config() -> HttpConfig {
        serde_json::from_str(
            r#"{"hosts":[{"host":"github.com","allow":["* /**"],"git_push":{"repository":"/o/r"}},
                         {"host":"*.example.test","allow":["GET /**","POST /v1/messages"]}],
                "credentials":[{"name":"anthropic","hosts":["api.anthropic.com"],"header":"x-api-key",
                                "stand_in":"sk-ant-api03-standin"}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn the_config_reads_and_writes_rules_as_text() {
        let cfg = config();
        assert_eq!(
            cfg.hosts[0].git_push.as_ref().unwrap().refs,
            default_push_refs()
        );
        assert_eq!(cfg.hosts[1].allow[1], rule("POST /v1/messages"));
        assert_eq!(cfg.credentials[0].value_prefix, "");
        let json = serde_json::to_string(&cfg).unwrap();
        assert!(
            json.contains(r#""allow":["GET /**","POST /v1/messages"]"#),
            "{json}"
        );
        assert!(json.contains(r#""hosts":["api.anthropic.com"]"#), "{json}");
        assert_eq!(serde_json::from_str::<HttpConfig>(&json).unwrap(), cfg);
        let bad = r#"{"hosts":[{"host":"a.test","allow":["GET a"]}]}"#;
        let err = serde_json::from_str::<HttpConfig>(bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("the path must start with /"), "{err}");
        let bad = r#"{"hosts":[{"host":"*","allow":[]}]}"#;
        assert!(serde_json::from_str::<HttpConfig>(bad).is_err());
    }

    #[test]
    fn inspected_hosts_are_those_with_rules_credentials_or_a_forge_push() {
        let cfg = config();
        assert!(cfg.inspects("api.anthropic.com"));
        assert!(cfg.inspects("github.com"));
        // github.com's push rule binds its API too.
        assert!(cfg.inspects("api.github.com"));
        assert!(cfg.inspects("x.example.test"));
        assert!(!cfg.inspects("example.test"));
        assert!(!cfg.inspects("pypi.org"));
        assert!(!HttpConfig::default().inspects("pypi.org"));
        let all = HttpConfig {
            inspect_all: true,
            ..HttpConfig::default()
        };
        assert!(all.inspects("pypi.org"));
        assert!(HttpConfig::default().is_empty() && !all.is_empty());
    }

    #[test]
    fn stand_ins_keep_the_known_prefix_and_the_length() {
        let random: Vec<u8> = (0..=255u8).cycle().take(400).collect();
        for (real, prefix) in [
            (
                "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA-BBBB",
                "sk-ant-api03-",
            ),
            (
                "sk-ant-oat01-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                "sk-ant-oat01-",
            ),
            (
                "sk-proj-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                "sk-proj-",
            ),
            ("sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "sk-"),
            ("ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "ghp_"),
            (
                "github_pat_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                "github_pat_",
            ),
            ("gho_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "gho_"),
            ("AIzaxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "AIza"),
            ("plainvaluexxxxxxxxxxxxxxxxxxxxxxx", ""),
        ] {
            let need = stand_in_random_len(real);
            let stand_in = stand_in_for(real, &random[..need]).unwrap();
            assert!(stand_in.starts_with(prefix), "{stand_in}");
            assert_eq!(stand_in.len(), real.len(), "{stand_in}");
            let tail = &stand_in[prefix.len()..];
            assert!(
                tail.bytes().all(|b| b.is_ascii_alphanumeric()),
                "{stand_in}"
            );
            assert_ne!(stand_in, real);
            assert_eq!(stand_in_for(real, &random[..need - 1]), None);
        }
        // A short value gets a longer stand-in, so it cannot turn up in a request by chance.
        let short = stand_in_for("ghp_abc", &random).unwrap();
        assert_eq!(short.len(), 4 + MIN_STAND_IN_RANDOM);
        // Other random bytes, another stand-in.
        let other: Vec<u8> = random
            .iter()
            .map(|b| b.wrapping_mul(7).wrapping_add(3))
            .collect();
        assert_ne!(stand_in_for("ghp_abc", &other), Some(short));
    }

    #[test]
    fn the_allow_hint_quotes_the_rule_for_a_shell() {
        assert_eq!(
            allow_hint("api.example.test", "POST", "/v1/it's"),
            "yolo allow --http 'api.example.test POST /v1/it'\\''s'"
        );
    }
}
