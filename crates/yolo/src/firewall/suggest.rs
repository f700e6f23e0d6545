//! `yolo firewall suggest`: the smallest allowlist that would have let a session do what it did,
//! from its audit log. Pure: events in, a [`Suggestion`] out; `commands::firewall` reads the log
//! and writes the result where the user asks (`write_user`, `write_repo`).
//!
//! What counts as needed:
//! - A session whose network was `learn` or `open`: every name it looked up, and the ports of
//!   the connections it made (`connection` records).
//! - A `firewall` session: what it was refused (`dns` records with `refused`, `blocked`
//!   packets); what its allowlist already let through needs no suggestion.
//!
//! How the list is made small, in this order:
//! 1. A built-in preset (`firewall/*.txt`) that covers a name stands for it: `pypi` instead of
//!    `pypi.org` and `files.pythonhosted.org`. A name two presets cover goes to the one that
//!    covers more of the session's names.
//! 2. The other names, grouped by registrable domain (the Public Suffix List, `psl`): three or
//!    more names under one domain become `*.domain` (and `domain` when it was looked up
//!    itself); fewer stay exact. A wildcard opens names the session never used, so it is
//!    only offered where the session already used many.
//! 3. Ports other than 80 and 443 are kept (`db.example.com:5432`); a name used only on 80 and
//!    443 is suggested bare, as the presets and the user's own entries are written. A
//!    connection is the guard's by address, named for the name that last resolved to it, so
//!    on an address many names share (a CDN) the web ports cannot be told apart by name: an
//!    entry with ports lists only the unusual ones (a name that serves HTTPS too needs `,443`
//!    added by hand).
//! 4. Destinations reached by address (no name resolved to them) are listed as `ADDRESS:PORT`.
//!
//! Left out: single-label names (Compose siblings, `localhost`), reverse lookups (`.arpa`),
//! and DNS to other resolvers (port 53): the guard answers every lookup itself, and allowing
//! another resolver would open a path around it.

use crate::audit::{Event, EventKind};
use crate::firewall::presets;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use yolo_protocol::allowlist::Allowlist;

/// How many names under one registrable domain make a `*.domain` entry.
const WILDCARD_AT: usize = 3;

/// The web ports a bare name is suggested for.
const WEB_PORTS: [u16; 2] = [80, 443];

/// What `yolo firewall suggest` prints (and `--json` shows as it is).
#[derive(Debug, Default, Serialize, PartialEq)]
pub(crate) struct Suggestion {
    pub(crate) session: String,
    /// The session's network mode as recorded at its start (`learn`, `open`, `firewall`).
    pub(crate) network: String,
    /// Whether the list is of everything the session used (`learn`, `open`) or only of what
    /// it was refused (`firewall`).
    pub(crate) scope: &'static str,
    pub(crate) presets: Vec<PresetUse>,
    pub(crate) allow: Vec<Entry>,
    /// Lookups past the log's cap, recorded as counts without their names: the suggestion
    /// may miss names among them.
    pub(crate) unnamed_lookups: u64,
}

/// A preset the session's names call for.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct PresetUse {
    pub(crate) preset: String,
    /// The session's names it covers.
    pub(crate) names: Vec<String>,
    pub(crate) lookups: u64,
}

/// One allowlist entry to add.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Entry {
    pub(crate) pattern: String,
    /// The registrable domain it is grouped under (or the address).
    pub(crate) domain: String,
    /// The names (or address) it stands for.
    pub(crate) names: Vec<String>,
    pub(crate) lookups: u64,
    pub(crate) connections: u64,
}

/// What the log says one name was used for.
#[derive(Debug, Default)]
struct Use {
    lookups: u64,
    /// Connections by destination port.
    ports: BTreeMap<u16, u64>,
}

/// The suggestion for `session`'s `events` (all its files, in any order).
pub(crate) fn suggest(session: &str, events: &[Event]) -> Suggestion {
    let network = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::SessionStart { network, .. } => Some(network.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let everything = matches!(network.as_str(), "learn" | "open");
    let mut names: BTreeMap<String, Use> = BTreeMap::new();
    let mut addresses: BTreeMap<(String, u16), u64> = BTreeMap::new();
    let mut unnamed_lookups = 0;
    for event in events {
        match &event.kind {
            EventKind::Dns {
                name,
                decision,
                count,
                sample_of,
                ..
            } => {
                let wanted = if everything {
                    decision == "allowed" || decision == "refused"
                } else {
                    decision == "refused"
                };
                let mut count = count.unwrap_or(1);
                if sample_of.is_some() {
                    // One sample name for many lookups of other names.
                    unnamed_lookups += count.saturating_sub(1);
                    count = 1;
                }
                if wanted && wanted_name(name) {
                    names.entry(normal(name)).or_default().lookups += count;
                }
            }
            EventKind::Connection {
                dst,
                port,
                name,
                count,
                ..
            } if everything => note_connection(
                &mut names,
                &mut addresses,
                dst,
                *port,
                name,
                count.unwrap_or(1),
            ),
            EventKind::Blocked {
                dst,
                port,
                name,
                count,
                ..
            } => note_connection(
                &mut names,
                &mut addresses,
                dst,
                *port,
                name,
                count.unwrap_or(1),
            ),
            _ => {}
        }
    }
    let (presets, rest) = by_preset(names);
    // A wildcard only for what a session used, never for what it was refused: refused names
    // are all the agent's choice.
    let mut allow = by_domain(rest, if everything { WILDCARD_AT } else { usize::MAX });
    allow.extend(addresses.into_iter().map(|((dst, port), n)| {
        let pattern = if dst.contains(':') {
            format!("[{dst}]:{port}")
        } else {
            format!("{dst}:{port}")
        };
        Entry {
            pattern,
            domain: dst.clone(),
            names: vec![dst],
            lookups: 0,
            connections: n,
        }
    }));
    Suggestion {
        session: session.to_string(),
        network,
        scope: if everything { "used" } else { "refused" },
        presets,
        allow,
        unnamed_lookups,
    }
}

/// A connection (or a refused packet) to `dst:port`, by name when one resolved to it.
fn note_connection(
    names: &mut BTreeMap<String, Use>,
    addresses: &mut BTreeMap<(String, u16), u64>,
    dst: &str,
    port: Option<u16>,
    name: &Option<String>,
    count: u64,
) {
    let Some(port) = port else { return };
    if port == 53 {
        return; // another resolver: never suggested (module doc)
    }
    match name {
        Some(name) if wanted_name(name) => {
            *names
                .entry(normal(name))
                .or_default()
                .ports
                .entry(port)
                .or_default() += count;
        }
        Some(_) => {}
        // The host, its containers, the cloud's metadata: never suggested, whatever the
        // agent tried to reach (the guard keeps them out of reach by design).
        None if internal(dst) => {}
        None => *addresses.entry((dst.to_string(), port)).or_default() += count,
    }
}

fn normal(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn internal(dst: &str) -> bool {
    dst.parse::<std::net::IpAddr>()
        .map_or(true, |a| yolo_protocol::allowlist::is_internal_address(&a))
}

/// A name an exact allowlist entry could be for (module doc: what is left out). The agent
/// chooses the names it looks up, so only a plain host name under a registrable domain
/// passes: not a `*` label (it would be written as a wildcard), not an address literal (a
/// network entry), not a public suffix itself (`co.uk`).
fn wanted_name(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    yolo_protocol::allowlist::plain_host_name(&name)
        && !name.ends_with(".arpa")
        && psl::domain_str(&name).is_some()
        && Allowlist::parse(std::slice::from_ref(&name)).is_ok()
}

/// The presets that cover names, and the names none covers.
fn by_preset(mut names: BTreeMap<String, Use>) -> (Vec<PresetUse>, BTreeMap<String, Use>) {
    let lists: Vec<(&str, Allowlist)> = presets::names()
        .into_iter()
        .filter_map(|p| {
            let patterns = presets::load(p).ok()?;
            Some((p, Allowlist::parse(&patterns).ok()?))
        })
        .collect();
    let mut used = Vec::new();
    loop {
        // The preset that covers the most names not yet placed (ties: the first by name).
        let best = lists
            .iter()
            .map(|(preset, list)| {
                let covered: Vec<String> = names
                    .keys()
                    .filter(|n| list.lookup(n).is_some())
                    .cloned()
                    .collect();
                (preset, covered)
            })
            .filter(|(_, covered)| !covered.is_empty())
            .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)));
        let Some((preset, covered)) = best else { break };
        let lookups = covered
            .iter()
            .filter_map(|n| names.remove(n))
            .map(|u| u.lookups)
            .sum();
        used.push(PresetUse {
            preset: preset.to_string(),
            names: covered,
            lookups,
        });
    }
    used.sort_by(|a, b| a.preset.cmp(&b.preset));
    (used, names)
}

/// The registrable domain of `name` (`a.b.example.co.uk` → `example.co.uk`); the name itself
/// when the list does not know its suffix.
fn registrable(name: &str) -> String {
    psl::domain_str(name).unwrap_or(name).to_string()
}

/// The names no preset covers, as entries grouped by registrable domain (module doc).
fn by_domain(names: BTreeMap<String, Use>, wildcard_at: usize) -> Vec<Entry> {
    let mut groups: BTreeMap<String, Vec<(String, Use)>> = BTreeMap::new();
    for (name, used) in names {
        groups
            .entry(registrable(&name))
            .or_default()
            .push((name, used));
    }
    let mut entries = Vec::new();
    for (domain, members) in groups {
        let mut group = Vec::new();
        let (special, web): (Vec<_>, Vec<_>) = members
            .into_iter()
            .partition(|(_, u)| u.ports.keys().any(|p| !WEB_PORTS.contains(p)));
        for (name, used) in special {
            let unusual: BTreeMap<u16, u64> = used
                .ports
                .into_iter()
                .filter(|(p, _)| !WEB_PORTS.contains(p))
                .collect();
            let ports: Vec<String> = unusual.keys().map(u16::to_string).collect();
            group.push(Entry {
                pattern: format!("{name}:{}", ports.join(",")),
                domain: domain.clone(),
                names: vec![name],
                lookups: used.lookups,
                connections: unusual.values().sum(),
            });
        }
        let below: Vec<&(String, Use)> = web.iter().filter(|(n, _)| *n != domain).collect();
        if below.len() >= wildcard_at {
            group.push(Entry {
                pattern: format!("*.{domain}"),
                domain: domain.clone(),
                names: below.iter().map(|(n, _)| n.clone()).collect(),
                lookups: below.iter().map(|(_, u)| u.lookups).sum(),
                connections: below.iter().flat_map(|(_, u)| u.ports.values()).sum(),
            });
            if let Some((apex, used)) = web.iter().find(|(n, _)| *n == domain) {
                group.push(exact(&domain, apex, used));
            }
        } else {
            group.extend(web.iter().map(|(name, used)| exact(&domain, name, used)));
        }
        // By pattern: the wildcard first (`*` sorts before letters), then names.
        group.sort_by(|a, b| a.pattern.cmp(&b.pattern));
        entries.extend(group);
    }
    entries
}

fn exact(domain: &str, name: &str, used: &Use) -> Entry {
    Entry {
        pattern: name.to_string(),
        domain: domain.to_string(),
        names: vec![name.to_string()],
        lookups: used.lookups,
        connections: used.ports.values().sum(),
    }
}

impl Suggestion {
    /// Nothing to suggest.
    pub(crate) fn is_empty(&self) -> bool {
        self.presets.is_empty() && self.allow.is_empty()
    }

    /// The preset names.
    pub(crate) fn preset_names(&self) -> Vec<String> {
        self.presets.iter().map(|p| p.preset.clone()).collect()
    }

    /// The allow patterns.
    pub(crate) fn patterns(&self) -> Vec<String> {
        self.allow.iter().map(|e| e.pattern.clone()).collect()
    }

    /// The suggestion as a `[firewall]` table a user can paste into the user config, each
    /// entry with a comment saying what it stands for.
    pub(crate) fn to_toml(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let what = if self.scope == "used" {
            "everything it used"
        } else {
            "what its firewall refused"
        };
        let _ = writeln!(
            out,
            "# session {} (network {}): {what}",
            self.session,
            if self.network.is_empty() {
                "?"
            } else {
                &self.network
            }
        );
        if self.is_empty() {
            let _ = writeln!(out, "# nothing to add");
            return out;
        }
        let _ = writeln!(out, "[firewall]");
        if !self.presets.is_empty() {
            let _ = writeln!(out, "presets = [");
            for p in &self.presets {
                let _ = writeln!(
                    out,
                    "    {:<32} # {}: {}",
                    format!("\"{}\",", p.preset),
                    plural(p.lookups, "lookup"),
                    p.names.join(", ")
                );
            }
            let _ = writeln!(out, "]");
        }
        if !self.allow.is_empty() {
            let _ = writeln!(out, "allow = [");
            let mut domain = None;
            for e in &self.allow {
                if domain != Some(&e.domain) && e.names.len() == 1 && e.pattern != e.domain {
                    // Exact names of one domain stay together under the domain's name.
                    let _ = writeln!(out, "    # {}", e.domain);
                }
                domain = Some(&e.domain);
                let mut said = vec![plural(e.lookups, "lookup")];
                if e.connections > 0 {
                    said.push(plural(e.connections, "connection"));
                }
                if e.names.len() > 1 {
                    said.push(e.names.join(", "));
                }
                let _ = writeln!(
                    out,
                    "    {:<32} # {}",
                    format!("\"{}\",", e.pattern),
                    said.join("; ")
                );
            }
            let _ = writeln!(out, "]");
        }
        if self.unnamed_lookups > 0 {
            let _ = writeln!(
                out,
                "# {} past the log's cap were recorded without their names: some may be missing",
                plural(self.unnamed_lookups, "lookup")
            );
        }
        out
    }
}

fn plural(n: u64, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// The user config's text with `presets` and `allow` added to `[firewall]` (those already
/// there kept, comments and order kept); `None` when it has them all.
pub(crate) fn write_user(
    text: &str,
    presets: &[String],
    allow: &[String],
) -> Result<Option<String>, String> {
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| e.to_string())?;
    let table = doc
        .entry("firewall")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_like_mut()
        .ok_or("[firewall] is not a table")?;
    let mut changed = false;
    for (key, values) in [("presets", presets), ("allow", allow)] {
        if values.is_empty() {
            continue;
        }
        let array = table
            .entry(key)
            .or_insert(toml_edit::value(toml_edit::Array::new()))
            .as_array_mut()
            .ok_or_else(|| format!("[firewall] {key} is not a list"))?;
        for v in values {
            if !array.iter().any(|x| x.as_str() == Some(v)) {
                array.push(v.as_str());
                changed = true;
            }
        }
    }
    Ok(changed.then(|| doc.to_string()))
}

/// The user config's text with `rule` (`METHOD /path`) added for `host` (`name` or
/// `name:port`, as the guard's question names it), comments kept; `None` when it is there
/// already.
///
/// It goes to the `allow` list of the `[http."PATTERN"]` table that is the host's own: its
/// exact name, else another exact pattern that covers it (`name:443,8443`). When only a
/// wildcard or a network covers the host, the host gets a table of its own on the port asked
/// about (`name:443`), a copy of that one (its rules and settings) with the rule added, so the
/// rule opens this host on that port and nothing else the wildcard covers (as the guard does
/// for the session). Later changes to the wildcard's table do not reach the copy. An error when no table
/// covers the host (a new one would replace the rules another part of the config gives it).
pub(crate) fn write_user_http(
    text: &str,
    host: &str,
    rule: &str,
) -> Result<Option<String>, String> {
    use yolo_protocol::allowlist::{Pattern, Ports};
    let (name, port) = match host.parse::<Pattern>() {
        Ok(Pattern::Exact {
            name,
            ports: Ports::Only(ports),
        }) if ports.len() == 1 => (name, Some(ports[0])),
        Ok(Pattern::Exact { name, .. }) => (name, None),
        _ => return Err(format!("{host:?} is not a host name")),
    };
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| e.to_string())?;
    let http = doc
        .get_mut("http")
        .and_then(|h| h.as_table_like_mut())
        .ok_or_else(|| format!("your config has no [http.\"{host}\"] section to add it to"))?;
    let sections: Vec<(String, Pattern)> = http
        .iter()
        .filter_map(|(k, _)| Some((k.to_string(), k.parse::<Pattern>().ok()?)))
        .filter(|(_, p)| yolo_protocol::http::host_matches(p, &name, port.or(Some(443))))
        .collect();
    let own = |p: &Pattern| matches!(p, Pattern::Exact { .. });
    let (key, pattern) = sections
        .iter()
        .find(|(_, p)| own(p))
        .or_else(|| sections.first())
        .ok_or_else(|| format!("no [http.\"PATTERN\"] section of your config covers {host}"))?
        .clone();
    let key = if own(&pattern) {
        key
    } else {
        // On the port asked about only, as the guard's copy for the session.
        let mine = Pattern::Exact {
            name,
            ports: Ports::Only(vec![port.unwrap_or(443)]),
        }
        .to_string();
        let mut copy = http
            .get(&key)
            .and_then(|t| t.as_table())
            .ok_or_else(|| format!("[http.\"{key}\"] is not a table"))?
            .clone();
        // Written after the rest (a copy keeps the original's place and comments).
        copy.set_position(None);
        copy.decor_mut().clear();
        http.insert(&mine, toml_edit::Item::Table(copy));
        mine
    };
    let table = http
        .get_mut(&key)
        .and_then(|t| t.as_table_like_mut())
        .ok_or_else(|| format!("[http.\"{key}\"] is not a table"))?;
    let array = table
        .entry("allow")
        .or_insert(toml_edit::value(toml_edit::Array::new()))
        .as_array_mut()
        .ok_or_else(|| format!("[http.\"{key}\"] allow is not a list"))?;
    if array.iter().any(|x| x.as_str() == Some(rule)) {
        return Ok(None);
    }
    array.push(rule);
    Ok(Some(doc.to_string()))
}

/// devcontainer.json's text with `presets` and `allow` added to `customizations.yolo.firewall`
/// (comments and layout kept); `None` when it has them all.
pub(crate) fn write_repo(
    text: &str,
    presets: &[String],
    allow: &[String],
) -> Result<Option<String>, String> {
    use jsonc_parser::cst::{CstInputValue, CstRootNode};
    let root = CstRootNode::parse(text, &jsonc_parser::ParseOptions::default())
        .map_err(|e| e.to_string())?;
    let top = root
        .object_value()
        .ok_or("its top level is not an object")?;
    let firewall = top
        .object_value_or_create("customizations")
        .and_then(|c| c.object_value_or_create("yolo"))
        .and_then(|y| y.object_value_or_create("firewall"))
        .ok_or("customizations.yolo.firewall is not an object")?;
    let mut changed = false;
    for (key, values) in [("presets", presets), ("allow", allow)] {
        if values.is_empty() {
            continue;
        }
        let array = firewall
            .array_value_or_create(key)
            .ok_or_else(|| format!("customizations.yolo.firewall.{key} is not a list"))?;
        let have: BTreeSet<String> = array
            .elements()
            .iter()
            .filter_map(|e| e.as_string_lit()?.decoded_value().ok())
            .collect();
        for v in values {
            if !have.contains(v) {
                array.append(CstInputValue::String(v.clone()));
                changed = true;
            }
        }
    }
    Ok(changed.then(|| root.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn event(kind: EventKind) -> Event {
        Event {
            ts: Utc::now(),
            session: "s".into(),
            phase: None,
            kind,
        }
    }

    fn start(network: &str) -> Event {
        event(EventKind::SessionStart {
            workspace: "/w".into(),
            config_file: "/w/.devcontainer/devcontainer.json".into(),
            config_hash: String::new(),
            image: String::new(),
            container: String::new(),
            limits: serde_json::Value::Null,
            grants: vec![],
            network: network.into(),
            allowlist: vec![],
            extra_ca: vec![],
        })
    }

    fn dns(name: &str, decision: &str) -> Event {
        event(EventKind::Dns {
            name: name.into(),
            qtype: "A".into(),
            decision: decision.into(),
            answers: vec![],
            rcode: None,
            entry: None,
            sample_of: None,
            count: None,
            first: None,
            last: None,
        })
    }

    fn connection(name: Option<&str>, dst: &str, port: u16) -> Event {
        event(EventKind::Connection {
            proto: "tcp".into(),
            dst: dst.into(),
            port: Some(port),
            name: name.map(str::to_string),
            count: None,
            first: None,
            last: None,
        })
    }

    #[test]
    fn a_learn_session_gets_presets_grouped_names_and_unusual_ports() {
        let events = vec![
            start("learn"),
            dns("pypi.org", "allowed"),
            dns("files.pythonhosted.org.", "allowed"),
            dns("files.pythonhosted.org", "allowed"),
            dns("registry.npmjs.org", "allowed"),
            dns("api.example.test", "allowed"),
            connection(Some("api.example.test"), "10.0.0.5", 443),
            dns("db.other.co.uk", "allowed"),
            connection(Some("db.other.co.uk"), "10.0.0.6", 5432),
            connection(Some("db.other.co.uk"), "10.0.0.6", 443),
            dns("a.many.test", "allowed"),
            dns("b.many.test", "allowed"),
            dns("c.many.test", "allowed"),
            dns("many.test", "allowed"),
            dns("db", "allowed"),                   // a Compose sibling
            dns("4.3.2.1.in-addr.arpa", "allowed"), // a reverse lookup
            connection(None, "93.184.216.34", 8443),
            connection(None, "93.184.216.53", 53),
            connection(None, "169.254.169.254", 80), // the cloud's metadata: never
            dns("*.co.uk", "allowed"),               // a literal `*` label: never a wildcard
            dns("169.254.169.254", "allowed"),       // an address as a name
            dns("co.uk", "allowed"),                 // a public suffix
        ];
        let s = suggest("s", &events);
        assert_eq!(s.scope, "used");
        assert_eq!(s.preset_names(), ["npm", "pypi"]);
        assert_eq!(
            s.presets[1].names,
            ["files.pythonhosted.org", "pypi.org"],
            "{s:?}"
        );
        assert_eq!(s.presets[1].lookups, 3);
        assert_eq!(
            s.patterns(),
            [
                "api.example.test",
                "*.many.test",
                "many.test",
                "db.other.co.uk:5432",
                "93.184.216.34:8443",
            ]
        );
        let text = s.to_toml();
        let parsed: toml::Value = toml::from_str(&text).expect(&text);
        assert_eq!(parsed["firewall"]["presets"][0].as_str(), Some("npm"));
        assert!(
            text.contains("a.many.test, b.many.test, c.many.test"),
            "{text}"
        );
    }

    #[test]
    fn a_firewall_session_gets_only_what_it_was_refused() {
        let events = vec![
            start("firewall"),
            dns("pypi.org", "allowed"),
            dns("evil.example", "refused"),
            dns("a.refused.example", "refused"),
            dns("b.refused.example", "refused"),
            dns("c.refused.example", "refused"),
            event(EventKind::Blocked {
                proto: "tcp".into(),
                dst: "10.1.1.1".into(),
                port: Some(22),
                name: Some("github.com".into()),
                sample_of: None,
                count: Some(2),
                first: None,
                last: None,
            }),
        ];
        let s = suggest("s", &events);
        assert_eq!(s.scope, "refused");
        assert_eq!(s.preset_names(), ["github"]);
        // Refused names are the agent's choice: never folded into a wildcard.
        assert_eq!(
            s.patterns(),
            [
                "evil.example",
                "a.refused.example",
                "b.refused.example",
                "c.refused.example"
            ]
        );
        assert!(s.to_toml().contains("what its firewall refused"));
    }

    #[test]
    fn nothing_used_is_nothing_suggested() {
        let s = suggest("s", &[start("learn"), dns("localhost", "allowed")]);
        assert!(s.is_empty());
        assert!(s.to_toml().contains("nothing to add"));
    }

    #[test]
    fn the_user_config_keeps_its_comments_and_gets_only_what_is_new() {
        let text = "# mine\n[firewall]\nallow = [\"a.test\"] # kept\n\n[limits]\ncpus = 2\n";
        let out = write_user(text, &["npm".into()], &["a.test".into(), "b.test".into()])
            .unwrap()
            .unwrap();
        assert!(out.contains("# mine") && out.contains("# kept"), "{out}");
        let v: toml::Value = toml::from_str(&out).unwrap();
        assert_eq!(v["firewall"]["allow"].as_array().unwrap().len(), 2);
        assert_eq!(v["firewall"]["presets"][0].as_str(), Some("npm"));
        assert_eq!(v["limits"]["cpus"].as_integer(), Some(2));
        assert_eq!(
            write_user(&out, &["npm".into()], &["b.test".into()]),
            Ok(None)
        );
        assert!(write_user("", &[], &["x.test".into()])
            .unwrap()
            .unwrap()
            .contains("[firewall]"));
        assert!(write_user("firewall = 1\n", &[], &["x.test".into()]).is_err());
    }

    #[test]
    fn devcontainer_json_keeps_its_comments_and_gets_the_team_section() {
        let text = "{\n  // the image\n  \"image\": \"debian\",\n  \"customizations\": {\"vscode\": {}}\n}\n";
        let out = write_repo(text, &["pypi".into()], &["api.example.test".into()])
            .unwrap()
            .unwrap();
        assert!(out.contains("// the image"), "{out}");
        let v: serde_json::Value =
            serde_json::from_str(&out.replace("// the image", "")).expect(&out);
        assert_eq!(
            v["customizations"]["yolo"]["firewall"]["presets"][0],
            "pypi"
        );
        assert_eq!(
            v["customizations"]["yolo"]["firewall"]["allow"][0],
            "api.example.test"
        );
        assert!(v["customizations"]["vscode"].is_object());
        assert_eq!(write_repo(&out, &["pypi".into()], &[]), Ok(None));
        assert!(write_repo("[1]", &[], &["a.test".into()]).is_err());
    }

    #[test]
    fn an_http_rule_is_saved_to_the_section_that_covers_its_host() {
        let text = "# mine\n[http.\"*.example.test\"]\nallow = [\"GET /**\"] # reads\n";
        let edited = write_user_http(text, "api.example.test", "POST /v1/files")
            .unwrap()
            .unwrap();
        assert!(
            edited.contains("# mine") && edited.contains("# reads"),
            "{edited}"
        );
        // Under a wildcard, the host gets a copy of its rules with the new one: the
        // wildcard's own list is left as it was, so no other name under it is opened.
        let parsed: toml::Value = toml::from_str(&edited).unwrap();
        assert_eq!(
            parsed["http"]["*.example.test"]["allow"],
            toml::Value::from(vec!["GET /**"]),
            "{edited}"
        );
        assert_eq!(
            parsed["http"]["api.example.test:443"]["allow"],
            toml::Value::from(vec!["GET /**", "POST /v1/files"]),
            "{edited}"
        );
        assert!(
            toml::from_str::<crate::user_config::UserConfig>(&edited).is_ok(),
            "{edited}"
        );
        assert_eq!(
            write_user_http(&edited, "api.example.test", "POST /v1/files").unwrap(),
            None,
            "there already"
        );
        // An exact section wins over a pattern.
        let both = format!("{text}[http.\"api.example.test\"]\nallow = []\n");
        let parsed: toml::Value = toml::from_str(
            &write_user_http(&both, "api.example.test", "PUT /x")
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            parsed["http"]["api.example.test"]["allow"],
            toml::Value::from(vec!["PUT /x"])
        );
        // A port: the wildcard's ports go with the copy.
        let ports = "[http.\"*.example.test:8443\"]\nallow = []\n";
        let parsed: toml::Value = toml::from_str(
            &write_user_http(ports, "api.example.test:8443", "GET /x")
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            parsed["http"]["api.example.test:8443"]["allow"],
            toml::Value::from(vec!["GET /x"])
        );
        assert!(write_user_http(ports, "api.example.test", "GET /x").is_err());
        // No section covers the host: not written (a new one would replace another's rules).
        assert!(write_user_http(text, "other.test", "GET /").is_err());
        assert!(write_user_http("", "other.test", "GET /").is_err());
    }
}
