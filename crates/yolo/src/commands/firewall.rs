//! `yolo allow`, `yolo deny` and `yolo firewall`: change or show a running session's allowlist
//! through the guard's control socket (`session::firewall`), without restarting anything; and
//! `yolo firewall suggest`, which reads a session's log (`firewall::suggest`).

use crate::cli::{SuggestTarget, Target};
use crate::error::{Error, Result};
use crate::firewall::control::Request;
use crate::project::Located;
use crate::session::firewall;

/// `yolo allow`: the patterns were checked by clap (`values::parse_pattern`), so a typo is a
/// usage error before any Docker work.
pub(crate) async fn allow(
    target: &Target,
    patterns: Vec<String>,
    http: Vec<String>,
) -> Result<i32> {
    let located = super::locate(target)?;
    if !http.is_empty() {
        firewall::request(
            &located,
            &Request::AllowHttp {
                rules: http.clone(),
            },
        )
        .await?;
        eprintln!(
            "yolo: allowed {} (effective now, no restart; for this session only)",
            http.join(", ")
        );
    }
    if patterns.is_empty() {
        return Ok(0);
    }
    let request = Request::Allow {
        patterns: patterns.clone(),
    };
    firewall::request(&located, &request).await?;
    eprintln!(
        "yolo: allowed {} (effective now, no restart)",
        patterns.join(" ")
    );
    Ok(0)
}

/// `yolo deny`: the patterns were checked by clap, like `allow`'s.
pub(crate) async fn deny(target: &Target, patterns: Vec<String>, http: Vec<String>) -> Result<i32> {
    let located = super::locate(target)?;
    if !http.is_empty() {
        firewall::request(
            &located,
            &Request::DenyHttp {
                rules: http.clone(),
            },
        )
        .await?;
        eprintln!(
            "yolo: denied {} (effective now, no restart; for this session only)",
            http.join(", ")
        );
    }
    if patterns.is_empty() {
        return Ok(0);
    }
    let request = Request::Deny {
        patterns: patterns.clone(),
    };
    let response = firewall::request(&located, &request).await?;
    let left = firewall::left_open(&patterns, &response);
    if response.removed.is_empty() {
        let why = if left.every_port.is_empty() {
            format!(
                "none of {} is in the allowlist; `yolo firewall` shows it",
                patterns.join(" ")
            )
        } else {
            format!("nothing denied: {}", left.every_port.join("; "))
        };
        return Err(Error::Usage(why));
    }
    eprintln!(
        "yolo: denied {}{}",
        response.removed.join(" "),
        if response.revoked.is_empty() {
            String::new()
        } else {
            format!(" (closed {})", response.revoked.join(", "))
        }
    );
    for warning in left.every_port.iter().chain(&left.by_another_entry) {
        eprintln!("{} {warning}", console::style("warning:").yellow().bold());
    }
    Ok(0)
}

/// `yolo firewall [--json]`: the running guard's allowlist, open addresses and counters.
pub(crate) async fn show(target: &Target, json: bool) -> Result<i32> {
    let located = super::locate(target)?;
    if json {
        crate::output::print(&firewall::view(&located).await?);
        return Ok(0);
    }
    let response = firewall::request(&located, &Request::Status).await?;
    let mode = response.mode.map(crate::firewall::mode_name).unwrap_or("?");
    println!("network: {mode}");
    println!("allowlist:");
    for p in response.patterns.iter().flatten() {
        println!("  {p}");
    }
    println!("open addresses:");
    if response.elements.is_empty() {
        println!("  (none yet: addresses open when an allowed name is resolved)");
    }
    for e in &response.elements {
        let expires = e
            .expires_secs
            .map(|s| format!("expires in {s}s"))
            .unwrap_or_else(|| "static".into());
        println!("  {:<40} {:<12} {expires}", e.element, e.set);
    }
    println!("counters:");
    for (name, c) in &response.counters {
        println!(
            "  {name:<24} {:>10} packets {:>12} bytes",
            c.packets, c.bytes
        );
    }
    Ok(0)
}

/// `yolo firewall suggest [SESSION] [--write user|repo] [--json]`: the smallest allowlist for
/// what a session did (`firewall::suggest`), printed, and saved where `--write` says.
pub(crate) async fn suggest(
    target: &Target,
    session: Option<String>,
    write: Option<SuggestTarget>,
    json: bool,
) -> Result<i32> {
    use crate::firewall::suggest;
    super::audit::collect_if_remote(target).await;
    let session = super::audit::chosen_session(target, session).await?;
    let events = crate::audit::read_session(&session)?;
    let found = suggest::suggest(&session, &events);
    if json {
        crate::output::print(&found);
    } else {
        print!("{}", found.to_toml());
    }
    let Some(place) = write else {
        if !found.is_empty() && !json {
            eprintln!("yolo: `yolo firewall suggest --write user` saves it to your config; `--write repo` to devcontainer.json for the team");
        }
        return Ok(0);
    };
    let (presets, allow) = (found.preset_names(), found.patterns());
    let config_file = || super::locate(target).map(|l| l.config_file);
    eprintln!("yolo: {}", save(config_file, place, &presets, &allow)?);
    Ok(0)
}

/// Add `presets` and `allow` to the user config (`User`) or to devcontainer.json's
/// `customizations.yolo.firewall` (`Repo`), comments kept; what was done, in words.
/// `config_file` finds devcontainer.json (asked only for `Repo`).
pub(crate) fn save(
    config_file: impl FnOnce() -> Result<std::path::PathBuf>,
    place: SuggestTarget,
    presets: &[String],
    allow: &[String],
) -> Result<String> {
    use crate::firewall::suggest;
    let (path, edited) = match place {
        SuggestTarget::User => {
            let path = crate::user_config::UserConfig::path();
            let text = read_or_empty(&path)?;
            let edited = suggest::write_user(&text, presets, allow).map_err(|message| {
                Error::UserConfig {
                    file: path.clone(),
                    message,
                }
            })?;
            // What is written must load: checked before it replaces the file.
            if let Some(new) = &edited {
                toml::from_str::<crate::user_config::UserConfig>(new).map_err(|e| {
                    Error::UserConfig {
                        file: path.clone(),
                        message: format!("the edited config would not load: {e}"),
                    }
                })?;
            }
            (path, edited)
        }
        SuggestTarget::Repo => {
            let path = config_file()?;
            let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
            let edited =
                suggest::write_repo(&text, presets, allow).map_err(|message| Error::Config {
                    file: path.clone(),
                    line: None,
                    column: None,
                    property: Some("customizations.yolo.firewall".into()),
                    message,
                })?;
            (path, edited)
        }
    };
    Ok(match edited {
        None => format!("{} already has all of it", path.display()),
        Some(text) => {
            replace(&path, &text)?;
            let next = match place {
                SuggestTarget::User => "the next `yolo up` uses it",
                SuggestTarget::Repo => {
                    "review and commit it; the next `yolo up` asks you to approve the changed config"
                }
            };
            format!("saved to {} ({next})", path.display())
        }
    })
}

/// `yolo approvals [--json]`: the questions the running guard holds for an answer.
pub(crate) async fn approvals(target: &Target, json: bool) -> Result<i32> {
    let located = super::locate(target)?;
    let response = firewall::request(&located, &Request::Pending).await?;
    if json {
        crate::output::print(&response.pending);
        return Ok(0);
    }
    if response.pending.is_empty() {
        println!("no question waits for an answer");
        return Ok(0);
    }
    for p in &response.pending {
        let qtype = if p.qtype.is_empty() {
            String::new()
        } else {
            format!("{}, ", p.qtype)
        };
        println!(
            "{:>4}  {} {} ({qtype}{} waiting, refused in {}s)",
            p.id,
            p.what,
            question(p),
            p.waiting,
            p.expires_secs
        );
    }
    let flag = located.flag();
    eprintln!("yolo: `yolo allow{flag} --pending ID [--save user|repo]` lets it through; `yolo deny{flag} --pending ID` refuses it now");
    Ok(0)
}

/// Who answers a held question, for its record: the host user and the command.
fn decider(command: &str) -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        // SAFETY: getuid cannot fail and touches no memory.
        .unwrap_or_else(|_| format!("uid {}", unsafe { libc::getuid() }));
    format!("{user} ({command})")
}

/// A held question as every view shows it: the name (or the rule), and a request's query
/// string, which the rule does not match on (an allow lets any query through). Printable ASCII
/// only, the rest percent-escaped, so each character takes one column and looks like itself:
/// what the row says is what is read (the guard offers ASCII names and rules only; a query is
/// the agent's to choose).
pub(crate) fn question(p: &yolo_protocol::control::PendingApproval) -> String {
    let name = ascii_only(&p.name);
    match &p.query {
        Some(query) => format!("{name} (query ?{}; any query passes)", ascii_only(query)),
        None => name,
    }
}

/// `text` with every byte outside printable ASCII as `%XX`.
pub(crate) fn ascii_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b == b' ' || b.is_ascii_graphic() {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `yolo allow --pending ID [--save user|repo]` and `yolo deny --pending ID`.
pub(crate) async fn decide(
    target: &Target,
    id: u64,
    allow: bool,
    save_to: Option<SuggestTarget>,
) -> Result<i32> {
    let located = super::locate(target)?;
    let via = if allow {
        "yolo allow --pending"
    } else {
        "yolo deny --pending"
    };
    for line in answer(&located, id, allow, save_to, via).await? {
        eprintln!("yolo: {line}");
    }
    Ok(0)
}

/// Answer held question `id` (and save an allowed name where `save_to` says); what was done,
/// line by line. Shared with `yolo watch`'s keys and `yolo run`'s prompt; `via` names the
/// command or key that answered, for the record.
pub(crate) async fn answer(
    located: &Located,
    id: u64,
    allow: bool,
    save_to: Option<SuggestTarget>,
    via: &str,
) -> Result<Vec<String>> {
    let how = match save_to {
        None => "session",
        Some(SuggestTarget::User) => "user config",
        Some(SuggestTarget::Repo) => "devcontainer.json",
    };
    if allow && save_to == Some(SuggestTarget::Repo) {
        // A request's rule cannot go there (the repository's rules only narrow): said before
        // anything is answered, so the question stays for another answer.
        let listed = firewall::request(located, &Request::Pending).await?;
        if listed
            .pending
            .iter()
            .any(|q| q.id == id && q.what == "http")
        {
            return Err(Error::Usage(format!(
                "question {id} is a request, whose rule cannot be saved to devcontainer.json (the repository's rules for a host can only narrow what your config allows): allow it with --save user, or without --save for this session"
            )));
        }
    }
    let response = firewall::request(
        located,
        &Request::Decide {
            id,
            allow,
            by: decider(via),
            how: how.into(),
        },
    )
    .await?;
    let Some(decided) = response.pending.first() else {
        return Err(Error::Usage(format!(
            "the guard answered question {id} without its name"
        )));
    };
    let name = crate::visible::escape_controls(&decided.name);
    if !allow {
        return Ok(vec![format!(
            "refused {name} (its {} waiting lookups get REFUSED)",
            decided.waiting
        )]);
    }
    let mut said = vec![format!("allowed {name} for this session (effective now)")];
    match (save_to, decided.what.as_str()) {
        (None, _) => {}
        (Some(place), "http") => said.push(save_http(place, &decided.name)),
        (Some(place), _) => {
            let config_file = || Ok(located.config_file.clone());
            said.push(save(
                config_file,
                place,
                &[],
                std::slice::from_ref(&decided.name),
            )?);
        }
    }
    Ok(said)
}

/// Save a held request's rule (`HOST METHOD /path`) where it lasts: the host's own
/// `[http."HOST"]` in the user config (made from the wildcard that covers it, when that is
/// all there is: `suggest::write_user_http`). What was done, in words; the allow for this
/// session stands either way.
fn save_http(place: SuggestTarget, rule: &str) -> String {
    let not_saved = |why: String| {
        format!(
            "not saved: {why}; to keep it, add it to the `allow` list of [http.\"HOST\"] in your config"
        )
    };
    if place == SuggestTarget::Repo {
        return not_saved(
            "the repository's rules (customizations.yolo.http) can only narrow what your config allows"
                .into(),
        );
    }
    let Some((host, rule)) = rule.split_once(' ') else {
        return not_saved(format!("{rule:?} is not HOST METHOD /path"));
    };
    let path = crate::user_config::UserConfig::path();
    let edited = read_or_empty(&path)
        .map_err(|e| e.to_string())
        .and_then(|text| crate::firewall::suggest::write_user_http(&text, host, rule))
        .and_then(|edited| match &edited {
            // What is written must load: checked before it replaces the file.
            Some(new) => toml::from_str::<crate::user_config::UserConfig>(new)
                .map(|_| edited.clone())
                .map_err(|e| format!("the edited config would not load: {e}")),
            None => Ok(None),
        });
    match edited {
        Ok(None) => format!("{} already has {rule} for {host}", path.display()),
        Ok(Some(text)) => match replace(&path, &text) {
            Ok(()) => format!(
                "saved {rule} for {host} to {} (the next session uses it)",
                path.display()
            ),
            Err(e) => not_saved(e.to_string()),
        },
        Err(why) => not_saved(why),
    }
}

fn read_or_empty(path: &std::path::Path) -> Result<String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Write `text` over `path` whole or not at all (`store::replace`).
fn replace(path: &std::path::Path, text: &str) -> Result<()> {
    crate::store::replace(path, text.as_bytes()).map_err(|e| Error::io(path, e))
}
