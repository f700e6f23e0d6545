//! The proxy's decision over one request, from its head alone (no body is buffered here): the
//! host's method and path rules, the credentials (stand-in in, real value out), the forge's push
//! rule. Pure: the transport hands in the head and acts on the [`Decision`].
//!
//! In order, for a request to `host`:
//! 1. A path servers could read two ways (`..`, an encoded `/`) is refused
//!    ([`yolo_protocol::http::normalize_path`]).
//! 2. The stand-in of any credential, anywhere in the head (a header's name or value, a
//!    `Basic` authorization decoded, the path and query, percent-decoded too), on a request to a
//!    host that is not one of that credential's, is refused as `credential_misuse`.
//! 3. On a credential's host, its header carrying the stand-in (after its prefix, or after any
//!    scheme of an `authorization` header, or as either half of a `Basic` user:password) is
//!    swapped for the real value; the header with any other value (someone else's key) is
//!    refused; no such header, the request goes unchanged (unauthenticated endpoints).
//! 4. A git push (`git::wants_push`) to a host with a `git_push` rule goes only to its
//!    repository; the receive-pack commands are then checked by the transport
//!    ([`Decision::CheckPush`]). On the forge's API host (`api.github.com`), see
//!    [`forge_write_refusal`].
//! 5. A host with rules: the first rule that matches forwards; none refuses. A host inspected
//!    only for a credential or by `inspect = "all"` forwards.

use super::credentials::{Secret, Secrets};
use super::git::{self, PushStep};
use super::refusal::Refusal;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use http::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_ENCODING};
use yolo_protocol::http::{
    allow_hint, forge_of_api, host_matches, normalize_path, CredentialSpec, GitPush, HostRules,
    HttpConfig,
};

/// The head of a request as the transport read it.
pub(crate) struct RequestHead<'a> {
    /// The name the client asked for (SNI, or the Host header without TLS), as the transport
    /// has already checked it against the Host header / `:authority`.
    pub host: &'a str,
    pub port: u16,
    pub method: &'a http::Method,
    /// The origin-form request target: `/path?query`.
    pub path_and_query: &'a str,
    pub headers: &'a http::HeaderMap,
}

#[derive(Debug)]
pub(crate) enum Decision {
    Forward {
        rule: String,
        swap: Option<Swap>,
    },
    /// The request's body starts with git receive-pack commands that must be checked first
    /// (call git::check_commands on the buffered pkt-lines up to the flush-pkt, then forward).
    CheckPush {
        rule: String,
        swap: Option<Swap>,
        push: GitPush,
    },
    Refuse(Refusal),
}

/// Put `value` in place of every `header` of the request: the credential's real value.
pub(crate) struct Swap {
    pub credential: String,
    pub header: HeaderName,
    pub value: HeaderValue,
}

impl std::fmt::Debug for Swap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Swap")
            .field("credential", &self.credential)
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

/// A credential with its real value (`None`: the guard has not been given it yet).
struct Credential {
    spec: CredentialSpec,
    header: Option<HeaderName>,
    real: Option<Secret>,
}

/// The rules of the session's inspected hosts, with the real credential values.
pub(crate) struct Policy {
    hosts: Vec<HostRules>,
    credentials: Vec<Credential>,
    /// The sections [`Policy::change_rule`] made for one host out of a wider pattern's: (the
    /// host's, the pattern it was copied from). A change named for that pattern reaches them.
    copied_from: Vec<(
        yolo_protocol::allowlist::Pattern,
        yolo_protocol::allowlist::Pattern,
    )>,
}

/// The shortest stand-in the policy looks for: a shorter one (a config written by hand) would
/// turn up in requests by chance and refuse them.
const MIN_STAND_IN: usize = 16;

impl Policy {
    pub fn new(cfg: &HttpConfig, secrets: &Secrets) -> Self {
        let credentials = cfg
            .credentials
            .iter()
            .filter(|spec| spec.stand_in.len() >= MIN_STAND_IN)
            .map(|spec| Credential {
                spec: spec.clone(),
                header: HeaderName::from_bytes(spec.header.as_bytes()).ok(),
                real: secrets.get(&spec.name).cloned(),
            })
            .collect();
        Policy {
            hosts: cfg.hosts.clone(),
            credentials,
            copied_from: Vec::new(),
        }
    }

    pub fn decide(&self, req: &RequestHead) -> Decision {
        match self.decide_or_refuse(req) {
            Ok(decision) => decision,
            Err(refusal) => Decision::Refuse(refusal),
        }
    }

    fn decide_or_refuse(&self, req: &RequestHead) -> Result<Decision, Refusal> {
        let host = req.host.strip_suffix('.').unwrap_or(req.host);
        let host = host.to_ascii_lowercase();
        let path = normalize_path(req.path_and_query).map_err(|reason| Refusal {
            rule: "http path".into(),
            reason,
            misuse: None,
            lift: None,
            allow_hint: "nothing: send the path in its plain form".into(),
        })?;
        let query = req.path_and_query.split_once('?').map(|(_, q)| q);
        self.check_misuse(req, &host)?;
        let mut swap = None;
        for credential in self.credentials_of(&host, req.port) {
            if let Some(found) = credential.swap(req.headers)? {
                swap.get_or_insert(found);
            }
        }
        let rules = self.rules_of(&host, req.port);
        let method = req.method.as_str();
        if let Some(push) = rules.and_then(|r| r.git_push.as_ref()) {
            let forge = rules.map(|r| r.host.to_string()).unwrap_or_default();
            if let Some(wanted) = git::wants_push(&path, query) {
                let rule = git::rule_name(&forge);
                if !push.is_origin(&wanted.repository) {
                    return Err(Refusal {
                        rule,
                        reason: format!(
                            "git may push only to {} (origin), not to {}",
                            push.repository, wanted.repository
                        ),
                        misuse: None,
                        lift: None,
                        allow_hint: format!(
                            "nothing: pushes go only to the repository's origin ({})",
                            push.repository
                        ),
                    });
                }
                return Ok(match wanted.step {
                    PushStep::Advertise => Decision::Forward { rule, swap },
                    PushStep::Commands if req.headers.contains_key(CONTENT_ENCODING) => {
                        return Err(Refusal {
                            rule,
                            reason: "a compressed push cannot be checked by the guard".into(),
                            misuse: None,
                            lift: None,
                            allow_hint: "nothing: push without Content-Encoding".into(),
                        })
                    }
                    PushStep::Commands => Decision::CheckPush {
                        rule,
                        swap,
                        push: push.clone(),
                    },
                });
            }
        }
        if let Some((forge, push)) = self.forge_push_of_api(&host) {
            if let Some(refusal) = forge_write_refusal(&host, forge, method, &path, push) {
                return Err(refusal);
            }
        }
        let Some(rules) = rules else {
            let rule = match &swap {
                Some(swap) => format!("credentials.{}", swap.credential),
                None => "inspected".into(),
            };
            return Ok(Decision::Forward { rule, swap });
        };
        let allowed = rules.allow.iter().find(|r| r.matches(method, &path));
        match allowed {
            Some(rule) => {
                narrowed(rules, &host, method, &path)?;
                Ok(Decision::Forward {
                    rule: format!("http.\"{}\".allow \"{rule}\"", rules.host),
                    swap,
                })
            }
            None => Err(Refusal {
                rule: format!("http.\"{}\".allow", rules.host),
                reason: if rules.allow.is_empty() {
                    format!("{host} has no allow rules: every request is refused")
                } else {
                    let list: Vec<String> = rules.allow.iter().map(|r| r.to_string()).collect();
                    format!("{method} {path} matches none of {}", list.join(", "))
                },
                misuse: None,
                // Not offered when the repository's narrowing would refuse it all the same.
                lift: narrowed(rules, &host, method, &path).ok().and_then(|()| {
                    crate::ask::http_question(&host_port(&host, req.port), method, &path)
                }),
                allow_hint: allow_hint(&host_port(&host, req.port), method, &path),
            }),
        }
    }

    /// Step 2: a stand-in on a request to a host that is not one of its credential's.
    fn check_misuse(&self, req: &RequestHead, host: &str) -> Result<(), Refusal> {
        for credential in &self.credentials {
            if credential.allows(host, req.port) {
                continue;
            }
            if head_contains(req, credential.spec.stand_in.as_bytes()) {
                let name = &credential.spec.name;
                return Err(Refusal {
                    rule: format!("credentials.{name}"),
                    reason: format!(
                        "the stand-in of credential {name} may go only to {}, not to {host}",
                        credential.hosts()
                    ),
                    misuse: Some(name.clone()),
                    lift: None,
                    allow_hint: format!(
                        "add {host} to credentials.{name}.hosts in your user config, if the real value may go there"
                    ),
                });
            }
        }
        Ok(())
    }

    fn credentials_of<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> impl Iterator<Item = &'a Credential> + 'a {
        self.credentials
            .iter()
            .filter(move |c| c.allows(host, port))
    }

    /// `yolo allow --http` (`add`) or `deny --http` on a running session: `rule` put first in
    /// (or taken out of) the `allow` list of the rules `host` gets. `host` is what the user
    /// named: `name` or `name:port` (the port a request goes to, 443 when not given), or a
    /// wildcard or network that is itself a section of the config.
    ///
    /// A change for one host never reaches another: when the host's rules are a wildcard's
    /// (or a wider network's), the host first gets a section of its own, a copy of those
    /// rules (same ports, narrowing and push rule), and the change goes there. A host with no
    /// rules takes every request already (a credential's host, `inspect = "all"`): it gets
    /// none here, which would refuse everything else on it.
    pub(crate) fn change_rule(
        &mut self,
        host: &str,
        rule: &yolo_protocol::http::HttpRule,
        add: bool,
    ) -> Result<String, String> {
        let (index, copies) = self.section_of(host)?;
        let section = self.hosts[index].host.to_string();
        if !add && !self.hosts[index].allow.contains(rule) {
            let list: Vec<String> = self.hosts[index]
                .allow
                .iter()
                .map(|r| r.to_string())
                .collect();
            return Err(format!(
                "the rules of {section} hold no {rule}; they are: {}",
                list.join(", ")
            ));
        }
        for index in std::iter::once(index).chain(copies) {
            let rules = &mut self.hosts[index];
            if !add {
                rules.allow.retain(|r| r != rule);
            } else if !rules.allow.contains(rule) {
                rules.allow.insert(0, rule.clone());
            }
        }
        Ok(section)
    }

    /// The index of the section a change for `host` goes to ([`Policy::change_rule`]), made
    /// for it when its rules are a wider pattern's (a copy of them, on the one port asked
    /// about); with the sections copied from it, when `host` names a pattern itself.
    fn section_of(&mut self, host: &str) -> Result<(usize, Vec<usize>), String> {
        use yolo_protocol::allowlist::{Pattern, Ports};
        let no_rules = || {
            format!(
                "{host} has no method and path rules in this session, so its proxy takes every request already (but what a credential refuses); give it some in your config with [http.\"{host}\"] allow = [...]"
            )
        };
        let wanted: Pattern = host.parse().map_err(|e| format!("{e}"))?;
        let port_of = |ports: &Ports| match ports {
            Ports::Only(ports) if ports.len() == 1 => ports[0],
            _ => 443,
        };
        let (name, port) = match &wanted {
            Pattern::Exact { name, ports } => (name.clone(), port_of(ports)),
            Pattern::Network { net, ports } if net.is_host() => {
                (net.addr.to_string(), port_of(ports))
            }
            // A wildcard or network named as such: that section, and the hosts' copies of it.
            _ => {
                let index = self
                    .hosts
                    .iter()
                    .position(|r| r.host == wanted)
                    .ok_or_else(no_rules)?;
                let copies = self
                    .copied_from
                    .iter()
                    .filter(|(_, from)| *from == wanted)
                    .filter_map(|(copy, _)| self.hosts.iter().position(|r| r.host == *copy))
                    .collect();
                return Ok((index, copies));
            }
        };
        let found = self.rules_of(&name, port).ok_or_else(no_rules)?;
        let own = match &found.host {
            Pattern::Exact { .. } => true,
            Pattern::Network { net, .. } => net.is_host(),
            Pattern::Wildcard { .. } => false,
        };
        let index = self
            .hosts
            .iter()
            .position(|r| std::ptr::eq(r, found))
            .expect("found among the hosts");
        if own {
            return Ok((index, Vec::new()));
        }
        let mut copy = self.hosts[index].clone();
        // The port asked about only: on its other ports the host keeps the pattern's rules
        // (or another section's).
        let ports = Ports::Only(vec![port]);
        copy.host = match wanted {
            Pattern::Exact { name, .. } => Pattern::Exact { name, ports },
            Pattern::Network { net, .. } => Pattern::Network { net, ports },
            Pattern::Wildcard { .. } => unreachable!("a wildcard returned above"),
        };
        self.copied_from
            .push((copy.host.clone(), self.hosts[index].host.clone()));
        // First: an address's own section wins over a wider network listed before it.
        self.hosts.insert(0, copy);
        Ok((0, Vec::new()))
    }

    /// The rules of `host`: an exact name's before a wildcard's, the first of each.
    fn rules_of(&self, host: &str, port: u16) -> Option<&HostRules> {
        let matching = || {
            self.hosts
                .iter()
                .filter(move |r| host_matches(&r.host, host, Some(port)))
        };
        matching()
            .find(|r| !matches!(r.host, yolo_protocol::allowlist::Pattern::Wildcard { .. }))
            .or_else(|| matching().next())
    }

    /// The forge and its push rule when `host` is a forge's API host (`api.github.com`): from
    /// the rules of the API host itself, else of the forge (`github.com`).
    fn forge_push_of_api(&self, host: &str) -> Option<(&str, &GitPush)> {
        let forge = forge_of_api(host)?;
        [host, forge].into_iter().find_map(|name| {
            let push = self
                .hosts
                .iter()
                .filter(|r| host_matches(&r.host, name, None))
                .find_map(|r| r.git_push.as_ref())?;
            Some((forge, push))
        })
    }
}

/// The host as a rule names it: `name`, or `name:port` off the HTTPS port.
fn host_port(host: &str, port: u16) -> String {
    match port {
        443 => host.to_string(),
        port => format!("{host}:{port}"),
    }
}

/// The repository's narrowing rules of `rules` (`customizations.yolo.http`): a request the
/// user's rules let through must match one of them too, when there are any.
fn narrowed(rules: &HostRules, host: &str, method: &str, path: &str) -> Result<(), Refusal> {
    let Some(narrow) = &rules.narrow else {
        return Ok(());
    };
    if narrow.iter().any(|r| r.matches(method, path)) {
        return Ok(());
    }
    let list: Vec<String> = narrow.iter().map(|r| r.to_string()).collect();
    Err(Refusal {
        rule: format!("customizations.yolo.http.\"{}\"", rules.host),
        reason: if narrow.is_empty() {
            format!("the repository's devcontainer.json allows no request to {host}")
        } else {
            format!(
                "{method} {path} matches none of the repository's rules ({})",
                list.join(", ")
            )
        },
        misuse: None,
        lift: None,
        allow_hint:
            "nothing: the repository's devcontainer.json narrows this host; change it there".into(),
    })
}

/// With a push rule on GitHub, its API (`api.github.com`) takes writes (every method but GET,
/// HEAD and OPTIONS) only under `/repos/{owner}/{repo}` of origin. Refused are thereby the
/// writes to other repositories (`/repos/{other}/{repo}/...`: contents, refs, issues, pulls,
/// releases, forks, template generation), gists (`/gists/**`), repository creation
/// (`/user/repos`, `/orgs/{org}/repos`), and every other write (`/user/keys`, `/user/**`,
/// `/orgs/**`, `/markdown`, ...). Let through: `POST /graphql`, which `gh` uses for reads and
/// for pull requests and whose body (queries and mutations alike) the proxy does not read;
/// docs/security-model.md says so.
fn forge_write_refusal(
    host: &str,
    forge: &str,
    method: &str,
    path: &str,
    push: &GitPush,
) -> Option<Refusal> {
    if matches!(method, "GET" | "HEAD" | "OPTIONS") || path == "/graphql" {
        return None;
    }
    let segments: Vec<&str> = path[1..].split('/').collect();
    if let ["repos", owner, repo, ..] = segments.as_slice() {
        if push.is_origin(&format!("/{owner}/{repo}")) {
            return None;
        }
    }
    Some(Refusal {
        rule: git::rule_name(forge),
        reason: format!(
            "{host} takes writes ({method}) only for the repository's origin {} (under /repos{}), not {path}",
            push.repository, push.repository
        ),
        misuse: None,
        lift: None,
        allow_hint: format!(
            "nothing: with git_push on {forge}, the API writes only to the repository's origin"
        ),
    })
}

impl Credential {
    fn allows(&self, host: &str, port: u16) -> bool {
        self.spec
            .hosts
            .iter()
            .any(|h| host_matches(h, host, Some(port)))
    }

    fn hosts(&self) -> String {
        let hosts: Vec<String> = self.spec.hosts.iter().map(|h| h.to_string()).collect();
        hosts.join(", ")
    }

    /// Step 3 on one of this credential's hosts: the swap its header asks for, if any.
    fn swap(&self, headers: &http::HeaderMap) -> Result<Option<Swap>, Refusal> {
        let name = &self.spec.name;
        let refuse = |reason: String| Refusal {
            rule: format!("credentials.{name}"),
            reason,
            misuse: None,
            lift: None,
            allow_hint: format!(
                "nothing: on {} the {} header carries only this session's stand-in of {name}",
                self.hosts(),
                self.spec.header
            ),
        };
        let Some(header) = &self.header else {
            return Ok(None);
        };
        let mut values = headers.get_all(header).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.any(|other| other != value) {
            return Err(refuse(format!("the request has several {header} headers")));
        }
        let Some(real) = &self.real else {
            return Err(refuse(format!(
                "the guard does not hold the value of credential {name}: run `yolo up` again"
            )));
        };
        let swapped = self.swapped(value.as_bytes(), real.expose()).ok_or_else(|| {
            refuse(format!(
                "the {header} header holds a value that is not this session's stand-in of {name} (another key)"
            ))
        })?;
        let value = HeaderValue::from_str(&swapped)
            .map_err(|_| refuse(format!("the real value of {name} cannot go in a header")))?;
        let mut value = value;
        value.set_sensitive(true);
        Ok(Some(Swap {
            credential: name.clone(),
            header: header.clone(),
            value,
        }))
    }

    /// `value` with the stand-in replaced by `real`, or `None` if it does not hold the stand-in
    /// where the credential goes.
    fn swapped(&self, value: &[u8], real: &str) -> Option<String> {
        let stand_in = &self.spec.stand_in;
        let prefix = &self.spec.value_prefix;
        let value = std::str::from_utf8(value).ok()?;
        if value.strip_prefix(prefix.as_str()) == Some(stand_in.as_str()) {
            return Some(format!("{prefix}{real}"));
        }
        if self.header.as_ref() != Some(&AUTHORIZATION) {
            return None;
        }
        // Any scheme: GitHub takes `token X` and `Bearer X`; git sends `Basic user:X`.
        let (scheme, token) = value.split_once(' ')?;
        if token == stand_in {
            return Some(format!("{scheme} {real}"));
        }
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = String::from_utf8(BASE64.decode(token.trim()).ok()?).ok()?;
        let (user, password) = decoded.split_once(':')?;
        let pair = match (user == stand_in, password == stand_in) {
            (_, true) => format!("{user}:{real}"),
            (true, false) => format!("{real}:{password}"),
            (false, false) => return None,
        };
        Some(format!("{scheme} {}", BASE64.encode(pair)))
    }
}

/// Whether `needle` is anywhere in the request's head: the path and query (as sent and
/// percent-decoded), a header's name or value, a `Basic` credential decoded.
fn head_contains(req: &RequestHead, needle: &[u8]) -> bool {
    let found = |hay: &[u8]| memchr::memmem::find(hay, needle).is_some();
    if found(req.path_and_query.as_bytes()) || found(&percent_decoded(req.path_and_query)) {
        return true;
    }
    req.headers.iter().any(|(name, value)| {
        let value = value.as_bytes();
        // Header names arrive lowercase, so the stand-in is looked for lowercase there.
        memchr::memmem::find(name.as_str().as_bytes(), &needle.to_ascii_lowercase()).is_some()
            || found(value)
            || basic_decoded(value).is_some_and(|pair| found(&pair))
    })
}

fn basic_decoded(value: &[u8]) -> Option<Vec<u8>> {
    let (scheme, token) = std::str::from_utf8(value).ok()?.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("basic")
        .then(|| BASE64.decode(token.trim()).ok())
        .flatten()
}

/// Every `%XX` decoded, repeatedly until nothing changes (`%2573` is `%73` is `s`), so an
/// encoded stand-in is found whichever way a server would decode it.
fn percent_decoded(text: &str) -> Vec<u8> {
    let mut current = text.as_bytes().to_vec();
    loop {
        let mut out = Vec::with_capacity(current.len());
        let mut i = 0;
        while i < current.len() {
            let hex = current
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match (current[i], hex) {
                (b'%', Some(b)) => {
                    out.push(b);
                    i += 3;
                }
                (b, _) => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        if out == current {
            return out;
        }
        current = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, Method};

    const KEY_STAND_IN: &str = "sk-ant-api03-StandInStandInStandIn";
    const KEY_REAL: &str = "sk-ant-api03-RealRealRealRealRealRe";
    const GH_STAND_IN: &str = "ghp_StandInStandInStandInStandIn0000";
    const GH_REAL: &str = "ghp_RealRealRealRealRealRealRealRe00";

    fn config() -> HttpConfig {
        let cfg: HttpConfig = serde_json::from_value(serde_json::json!({
            "hosts": [
                {"host": "github.com", "allow": ["* /**"], "git_push": {"repository": "/o/r"}},
                {"host": "api.example.test", "allow": ["GET /**", "POST /v1/messages"]},
                {"host": "*.example.test", "allow": ["GET /public/**"]},
                {"host": "closed.test", "allow": []},
                {"host": "narrowed.test", "allow": ["GET /**", "POST /**"], "narrow": ["GET /docs/**"]},
            ],
            "credentials": [
                {"name": "anthropic", "hosts": ["api.anthropic.com"], "header": "x-api-key",
                 "stand_in": KEY_STAND_IN},
                {"name": "github", "hosts": ["github.com", "api.github.com"],
                 "header": "authorization", "value_prefix": "Bearer ", "stand_in": GH_STAND_IN},
            ],
        }))
        .unwrap();
        cfg
    }

    fn policy() -> Policy {
        let cfg = config();
        let mut secrets = Secrets::default();
        secrets.insert("anthropic", KEY_REAL.into());
        secrets.insert("github", GH_REAL.into());
        Policy::new(&cfg, &secrets)
    }

    /// A request to decide: `Req::new("GET", "host", "/path").header(..).decide()`.
    struct Req {
        method: Method,
        host: String,
        port: u16,
        path: String,
        headers: HeaderMap,
    }

    impl Req {
        fn new(method: &str, host: &str, path: &str) -> Req {
            Req {
                method: method.parse().unwrap(),
                host: host.into(),
                port: 443,
                path: path.into(),
                headers: HeaderMap::new(),
            }
        }

        fn header(mut self, name: &'static str, value: &str) -> Req {
            self.headers.append(name, value.parse().unwrap());
            self
        }

        fn decide_with(&self, policy: &Policy) -> Decision {
            policy.decide(&RequestHead {
                host: &self.host,
                port: self.port,
                method: &self.method,
                path_and_query: &self.path,
                headers: &self.headers,
            })
        }

        fn decide(&self) -> Decision {
            self.decide_with(&policy())
        }

        fn refused(&self) -> Refusal {
            match self.decide() {
                Decision::Refuse(refusal) => refusal,
                other => panic!("{} {}{}: {other:?}", self.method, self.host, self.path),
            }
        }

        /// The rule that forwarded it, and the swapped header's value.
        fn forwarded(&self) -> (String, Option<(String, String)>) {
            match self.decide() {
                Decision::Forward { rule, swap } => (rule, swap.map(shown)),
                other => panic!("{} {}{}: {other:?}", self.method, self.host, self.path),
            }
        }
    }

    #[test]
    fn the_repositorys_rules_narrow_the_users_and_never_widen_them() {
        let (rule, _) = Req::new("GET", "narrowed.test", "/docs/a").forwarded();
        assert_eq!(rule, "http.\"narrowed.test\".allow \"GET /**\"");
        // The user allows POST, the repository does not: refused, naming the repository.
        let refusal = Req::new("POST", "narrowed.test", "/docs/a").refused();
        assert_eq!(refusal.rule, "customizations.yolo.http.\"narrowed.test\"");
        // The repository's rules cannot open what the user's do not.
        Req::new("GET", "narrowed.test", "/other").refused();
        let refused = Req::new("DELETE", "narrowed.test", "/docs/a").refused();
        // Nor is that asked: an allow would add a rule the narrowing refuses anyway.
        assert_eq!(refused.lift, None);
        let asked = Req::new("DELETE", "narrowed.test", "/docs/b");
        let asked = Req {
            host: "api.example.test".into(),
            ..asked
        }
        .refused();
        assert_eq!(
            asked.lift.as_deref(),
            Some("api.example.test DELETE /docs/b")
        );
    }

    fn shown(swap: Swap) -> (String, String) {
        (
            swap.header.to_string(),
            swap.value.to_str().unwrap().to_string(),
        )
    }

    fn basic(pair: &str) -> String {
        format!("Basic {}", BASE64.encode(pair))
    }

    #[test]
    fn the_first_matching_rule_forwards_and_no_match_refuses() {
        let (rule, swap) = Req::new("GET", "api.example.test", "/v1/models?x=1").forwarded();
        assert_eq!(rule, "http.\"api.example.test\".allow \"GET /**\"");
        assert!(swap.is_none());
        let (rule, _) = Req::new("POST", "api.example.test", "/v1/messages").forwarded();
        assert_eq!(
            rule,
            "http.\"api.example.test\".allow \"POST /v1/messages\""
        );
        let refusal = Req::new("POST", "api.example.test", "/v1/files?purpose=x").refused();
        assert_eq!(refusal.rule, "http.\"api.example.test\".allow");
        assert_eq!(
            refusal.reason,
            "POST /v1/files matches none of GET /**, POST /v1/messages"
        );
        assert_eq!(
            refusal.allow_hint,
            "yolo allow --http 'api.example.test POST /v1/files'"
        );
        assert_eq!(
            refusal.body(),
            "Refused by yolo's guard.\nrule: http.\"api.example.test\".allow\n\
             reason: POST /v1/files matches none of GET /**, POST /v1/messages\n\
             to allow it: yolo allow --http 'api.example.test POST /v1/files'\n"
        );
        assert_eq!(refusal.misuse, None);
    }

    #[test]
    fn an_exact_hosts_rules_come_before_a_wildcards_and_a_host_without_rules_is_closed() {
        // api.example.test has its own rules, which the wildcard's would not allow.
        Req::new("GET", "API.example.test.", "/private").forwarded();
        let (rule, _) = Req::new("GET", "cdn.example.test", "/public/a").forwarded();
        assert_eq!(rule, "http.\"*.example.test\".allow \"GET /public/**\"");
        Req::new("GET", "cdn.example.test", "/private").refused();
        let refusal = Req::new("GET", "closed.test", "/").refused();
        assert_eq!(
            refusal.reason,
            "closed.test has no allow rules: every request is refused"
        );
        // A host inspected for a credential only, with no rules, forwards.
        let (rule, swap) = Req::new("GET", "api.anthropic.com", "/v1/models").forwarded();
        assert_eq!((rule.as_str(), swap), ("inspected", None));
    }

    #[test]
    fn a_path_servers_read_two_ways_is_refused_before_the_rules() {
        let refusal = Req::new("GET", "cdn.example.test", "/public/%2e%2e/private").refused();
        assert_eq!(refusal.rule, "http path");
        assert!(refusal.reason.contains(". or .. segment"), "{refusal:?}");
        Req::new("GET", "cdn.example.test", "/public/..%2Fprivate").refused();
        Req::new("GET", "cdn.example.test", "/%70ublic/a").forwarded();
    }

    #[test]
    fn the_stand_in_becomes_the_real_value_on_its_hosts() {
        let req = Req::new("POST", "api.anthropic.com", "/v1/messages");
        let (rule, swap) = req.header("x-api-key", KEY_STAND_IN).forwarded();
        assert_eq!(rule, "credentials.anthropic");
        assert_eq!(swap, Some(("x-api-key".into(), KEY_REAL.into())));
        // With its prefix.
        let req = Req::new("GET", "api.github.com", "/user");
        let with_prefix = req.header("authorization", &format!("Bearer {GH_STAND_IN}"));
        let (_, swap) = with_prefix.forwarded();
        assert_eq!(swap.unwrap().1, format!("Bearer {GH_REAL}"));
        // Another scheme of an authorization header (GitHub's `token`).
        let req = Req::new("GET", "api.github.com", "/user");
        let (_, swap) = req
            .header("authorization", &format!("token {GH_STAND_IN}"))
            .forwarded();
        assert_eq!(swap.unwrap().1, format!("token {GH_REAL}"));
        // The swapped value is marked sensitive (hpack never indexes it).
        let req = Req::new("GET", "api.github.com", "/user");
        match req
            .header("authorization", &format!("token {GH_STAND_IN}"))
            .decide()
        {
            Decision::Forward {
                swap: Some(swap), ..
            } => assert!(swap.value.is_sensitive()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn git_over_https_gets_the_real_token_in_its_basic_pair() {
        let req = Req::new(
            "GET",
            "github.com",
            "/o/r.git/info/refs?service=git-upload-pack",
        );
        let (_, swap) = req
            .header(
                "authorization",
                &basic(&format!("x-access-token:{GH_STAND_IN}")),
            )
            .forwarded();
        let (header, value) = swap.unwrap();
        assert_eq!(header, "authorization");
        assert_eq!(value, basic(&format!("x-access-token:{GH_REAL}")));
        // The token as the user name (`https://TOKEN@github.com`).
        let req = Req::new(
            "GET",
            "github.com",
            "/o/r.git/info/refs?service=git-upload-pack",
        );
        let (_, swap) = req
            .header("authorization", &basic(&format!("{GH_STAND_IN}:")))
            .forwarded();
        assert_eq!(swap.unwrap().1, basic(&format!("{GH_REAL}:")));
    }

    #[test]
    fn another_key_on_a_credentials_host_is_refused() {
        let other = "sk-ant-api03-SomeoneElsesKeySomeoneEl";
        let req = Req::new("POST", "api.anthropic.com", "/v1/messages");
        let refusal = req.header("x-api-key", other).refused();
        assert_eq!(refusal.rule, "credentials.anthropic");
        assert!(
            refusal.reason.contains("not this session's stand-in"),
            "{refusal:?}"
        );
        assert!(!refusal.body().contains(KEY_REAL));
        // In a Basic pair, too.
        let req = Req::new("POST", "github.com", "/o/r.git/git-upload-pack");
        req.header("authorization", &basic("x-access-token:ghp_attackers"))
            .refused();
        // Or next to the stand-in in a second header of the same name.
        let req = Req::new("POST", "api.anthropic.com", "/v1/messages");
        let refusal = req
            .header("x-api-key", KEY_STAND_IN)
            .header("x-api-key", other)
            .refused();
        assert!(refusal.reason.contains("several"), "{refusal:?}");
        // No such header: unauthenticated, forwarded as is.
        Req::new("GET", "api.anthropic.com", "/").forwarded();
    }

    #[test]
    fn a_credential_whose_value_the_guard_lacks_is_refused_not_sent_as_the_stand_in() {
        let cfg = HttpConfig {
            credentials: policy()
                .credentials
                .iter()
                .map(|c| c.spec.clone())
                .collect(),
            ..HttpConfig::default()
        };
        let policy = Policy::new(&cfg, &Secrets::default());
        let req =
            Req::new("POST", "api.anthropic.com", "/v1/messages").header("x-api-key", KEY_STAND_IN);
        match req.decide_with(&policy) {
            Decision::Refuse(refusal) => {
                assert!(
                    refusal.reason.contains("run `yolo up` again"),
                    "{refusal:?}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_stand_in_anywhere_on_another_host_is_credential_misuse() {
        let encoded: String = KEY_STAND_IN.bytes().map(|b| format!("%{b:02x}")).collect();
        let twice = encoded.replace('%', "%25");
        let cases = [
            Req::new("POST", "api.example.test", "/v1/messages").header("x-api-key", KEY_STAND_IN),
            Req::new("GET", "api.example.test", "/x")
                .header("x-note", &format!("key={KEY_STAND_IN};")),
            Req::new("GET", "api.example.test", &format!("/x?k={KEY_STAND_IN}")),
            Req::new("GET", "api.example.test", &format!("/x/{KEY_STAND_IN}")),
            Req::new("GET", "api.example.test", &format!("/x?k={encoded}")),
            Req::new("GET", "api.example.test", &format!("/x?k={twice}")),
            Req::new("GET", "api.example.test", "/x")
                .header("authorization", &basic(&format!("u:{KEY_STAND_IN}"))),
            // A host with no rules and no credential of its own, inspected all the same.
            Req::new("GET", "api.github.com", "/").header("x-api-key", KEY_STAND_IN),
        ];
        for req in cases {
            let refusal = req.refused();
            assert_eq!(refusal.misuse.as_deref(), Some("anthropic"), "{refusal:?}");
            assert_eq!(refusal.rule, "credentials.anthropic");
            assert_eq!(
                refusal.reason,
                format!(
                    "the stand-in of credential anthropic may go only to api.anthropic.com, not to {}",
                    req.host
                )
            );
        }
        // In a header's name, which HTTP/2 and the header map lowercase.
        let name = format!("x-{}", KEY_STAND_IN.to_ascii_lowercase());
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_static("1"),
        );
        let req = Req {
            headers,
            ..Req::new("GET", "api.example.test", "/")
        };
        assert_eq!(req.refused().misuse.as_deref(), Some("anthropic"));
        // The GitHub token on the model API is misuse too.
        let req = Req::new("POST", "api.anthropic.com", "/v1/messages")
            .header("x-api-key", KEY_STAND_IN)
            .header("x-forward", GH_STAND_IN);
        assert_eq!(req.refused().misuse.as_deref(), Some("github"));
    }

    #[test]
    fn pushes_go_only_to_origin_and_are_checked_by_their_commands() {
        let req = Req::new(
            "GET",
            "github.com",
            "/o/r.git/info/refs?service=git-receive-pack",
        );
        let (rule, _) = req.forwarded();
        assert_eq!(rule, "http.\"github.com\".git_push");
        let with_token = Req::new("POST", "github.com", "/O/R.git/git-receive-pack").header(
            "authorization",
            &basic(&format!("x-access-token:{GH_STAND_IN}")),
        );
        match with_token.decide() {
            Decision::CheckPush { rule, swap, push } => {
                assert_eq!(rule, "http.\"github.com\".git_push");
                assert_eq!(push.repository, "/o/r");
                assert_eq!(swap.unwrap().credential, "github");
            }
            other => panic!("{other:?}"),
        }
        for (method, path) in [
            ("GET", "/evil/exfil.git/info/refs?service=git-receive-pack"),
            ("POST", "/evil/exfil.git/git-receive-pack"),
            ("POST", "/o/r-fork/git-receive-pack"),
            ("POST", "/o/r/../../evil/x/git-receive-pack"),
        ] {
            let refusal = Req::new(method, "github.com", path).refused();
            assert!(
                refusal.rule == "http.\"github.com\".git_push" || refusal.rule == "http path",
                "{refusal:?}"
            );
        }
        let refusal = Req::new("POST", "github.com", "/evil/exfil/git-receive-pack").refused();
        assert_eq!(
            refusal.reason,
            "git may push only to /o/r (origin), not to /evil/exfil"
        );
        // Fetches from anywhere go by the allow rules.
        Req::new("POST", "github.com", "/evil/x.git/git-upload-pack").forwarded();
        // A compressed push body cannot be read before it goes: refused.
        let gz = Req::new("POST", "github.com", "/o/r.git/git-receive-pack")
            .header("content-encoding", "gzip");
        assert!(gz.refused().reason.contains("compressed"));
    }

    #[test]
    fn the_forge_api_writes_only_to_origin() {
        for (method, path) in [
            ("GET", "/repos/evil/x/contents/a"),
            ("POST", "/repos/o/r/pulls"),
            ("PATCH", "/repos/O/R/issues/1"),
            ("PUT", "/repos/o/r/contents/README.md"),
            ("POST", "/graphql"),
            ("GET", "/gists"),
        ] {
            Req::new(method, "api.github.com", path).forwarded();
        }
        for (method, path) in [
            ("POST", "/repos/evil/x/issues"),
            ("PUT", "/repos/evil/x/contents/secret.txt"),
            ("DELETE", "/repos/o/other"),
            ("POST", "/repos/o/r-copy/git/refs"),
            ("POST", "/gists"),
            ("PATCH", "/gists/abc"),
            ("POST", "/user/repos"),
            ("POST", "/orgs/evil/repos"),
            ("POST", "/user/keys"),
            ("PROPFIND", "/repos/evil/x"),
        ] {
            let refusal = Req::new(method, "api.github.com", path).refused();
            assert_eq!(
                refusal.rule, "http.\"github.com\".git_push",
                "{method} {path}"
            );
            assert!(refusal.reason.contains(path), "{refusal:?}");
        }
    }

    #[test]
    fn without_a_push_rule_the_forge_api_is_left_alone() {
        let cfg = HttpConfig {
            inspect_all: true,
            ..HttpConfig::default()
        };
        let policy = Policy::new(&cfg, &Secrets::default());
        let req = Req::new("POST", "api.github.com", "/gists");
        assert!(matches!(req.decide_with(&policy), Decision::Forward { .. }));
        let req = Req::new("POST", "github.com", "/evil/x.git/git-receive-pack");
        assert!(matches!(req.decide_with(&policy), Decision::Forward { .. }));
        assert!(cfg.inspects("pypi.org"));
    }

    #[test]
    fn inspected_hosts_follow_the_config() {
        let policy = config();
        for host in [
            "github.com",
            "api.github.com",
            "api.anthropic.com",
            "x.example.test",
        ] {
            assert!(policy.inspects(host), "{host}");
        }
        assert!(!policy.inspects("pypi.org"));
    }

    #[test]
    fn a_short_stand_in_is_ignored_rather_than_refusing_every_request() {
        let cfg: HttpConfig = serde_json::from_value(serde_json::json!({
            "credentials": [{"name": "short", "hosts": ["a.test"], "header": "x-k", "stand_in": "a"}],
        }))
        .unwrap();
        let policy = Policy::new(&cfg, &Secrets::default());
        let req = Req::new("GET", "b.test", "/a/a").header("x-a", "a");
        assert!(matches!(req.decide_with(&policy), Decision::Forward { .. }));
    }

    /// `yolo allow --http` opens the request a rule refused, on the host's own rules (an
    /// exact name's, else the wildcard's); `deny --http` closes it again; a host without rules
    /// gets none (which would refuse the rest).
    #[test]
    fn rules_changed_while_the_session_runs_apply_to_the_next_request() {
        let mut live = policy();
        let upload = Req::new("POST", "api.example.test", "/v1/files");
        assert!(matches!(upload.decide_with(&live), Decision::Refuse(_)));
        let rule: yolo_protocol::http::HttpRule = "POST /v1/files".parse().unwrap();
        let section = live.change_rule("api.example.test", &rule, true).unwrap();
        assert_eq!(section, "api.example.test");
        assert!(matches!(
            upload.decide_with(&live),
            Decision::Forward { .. }
        ));
        live.change_rule("api.example.test", &rule, false).unwrap();
        assert!(matches!(upload.decide_with(&live), Decision::Refuse(_)));
        let err = live
            .change_rule("api.example.test", &rule, false)
            .unwrap_err();
        assert!(err.contains("hold no POST /v1/files"), "{err}");
        // A name under the wildcard gets a section of its own, a copy of the wildcard's
        // rules: the other names under it are not opened.
        let rule: yolo_protocol::http::HttpRule = "GET /private/**".parse().unwrap();
        let section = live.change_rule("docs.example.test", &rule, true).unwrap();
        assert_eq!(section, "docs.example.test:443");
        let private = Req::new("GET", "docs.example.test", "/private/x");
        assert!(matches!(
            private.decide_with(&live),
            Decision::Forward { .. }
        ));
        for host in ["other.example.test", "a.docs.example.test"] {
            let elsewhere = Req::new("GET", host, "/private/x");
            assert!(
                matches!(elsewhere.decide_with(&live), Decision::Refuse(_)),
                "{host}"
            );
        }
        let public = Req::new("GET", "docs.example.test", "/public/x");
        assert!(matches!(
            public.decide_with(&live),
            Decision::Forward { .. }
        ));
        // On its other ports the host keeps the wildcard's rules.
        let mut other_port = Req::new("GET", "docs.example.test", "/private/x");
        other_port.port = 8443;
        assert!(matches!(other_port.decide_with(&live), Decision::Refuse(_)));
        // Named as such, the wildcard's own section changes, and the copies made from it.
        let rule: yolo_protocol::http::HttpRule = "GET /wide/**".parse().unwrap();
        let section = live.change_rule("*.example.test", &rule, true).unwrap();
        assert_eq!(section, "*.example.test");
        for host in ["other.example.test", "docs.example.test"] {
            let wide = Req::new("GET", host, "/wide/x");
            assert!(
                matches!(wide.decide_with(&live), Decision::Forward { .. }),
                "{host}"
            );
        }
        live.change_rule("*.example.test", &rule, false).unwrap();
        let wide = Req::new("GET", "docs.example.test", "/wide/x");
        assert!(
            matches!(wide.decide_with(&live), Decision::Refuse(_)),
            "a deny of the wildcard's rule reaches the copy"
        );
        // Off port 443 the question names the port, and a change for it finds the host's
        // rules on that port.
        let mut odd = Req::new("POST", "api.example.test", "/v1/odd");
        odd.port = 8443;
        let Decision::Refuse(refusal) = odd.decide_with(&live) else {
            panic!("refused")
        };
        assert_eq!(
            refusal.lift.as_deref(),
            Some("api.example.test:8443 POST /v1/odd")
        );
        // A credential's host without rules takes every request: nothing to add to.
        let err = live
            .change_rule("api.anthropic.com", &rule, true)
            .unwrap_err();
        assert!(err.contains("has no method and path rules"), "{err}");
    }
}
