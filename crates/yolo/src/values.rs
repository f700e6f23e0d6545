//! The values flags and the user's config share, parsed once: clap calls these as value
//! parsers (a bad flag is a usage error naming it, 64) and `settings` calls them on the
//! config's strings (a bad setting is a config error naming it, 65). A module of its own so that
//! `cli` (which names them) and `settings` (which reads `cli`'s flags) do not import each other.

use crate::firewall::allowlist::Pattern;
use crate::policy;
use std::net::{IpAddr, SocketAddr};

/// `--cpus N`: a positive number of cores.
pub(crate) fn parse_cpus(text: &str) -> std::result::Result<f64, String> {
    let cpus = text
        .trim()
        .parse::<f64>()
        .map_err(|_| format!("\"{text}\" is not a number of CPUs, like 2 or 0.5"))?;
    policy::check_cpus(cpus).map_err(|e| e.to_string())
}

/// `audit --since WHEN`: an RFC 3339 time, or an age back from now (`90s`, `10m`, `2h`, `1d`).
pub(crate) fn parse_since(
    text: &str,
) -> std::result::Result<chrono::DateTime<chrono::Utc>, String> {
    let text = text.trim();
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    let bad =
        || format!("\"{text}\" is neither a time like 2026-11-22T10:00:00Z nor an age like 10m");
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let n: i64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    let age =
        chrono::Duration::try_seconds(n.checked_mul(seconds).ok_or_else(bad)?).ok_or_else(bad)?;
    chrono::Utc::now().checked_sub_signed(age).ok_or_else(bad)
}

/// `replay --speed N`: a factor above 0.
pub(crate) fn parse_speed(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 && n <= 1e6 => Ok(n),
        _ => Err(format!("\"{text}\" is not a speed, like 2 or 0.5")),
    }
}

/// `--memory SIZE`: bytes, at least what Docker accepts.
pub(crate) fn parse_memory(text: &str) -> std::result::Result<i64, String> {
    policy::check_memory(text).map_err(|e| e.to_string())
}

/// `--allow PATTERN`, `yolo allow`/`deny PATTERN`: one allowlist entry, checked now, kept as
/// typed (trimmed).
/// `HOST METHOD /path` for `yolo allow --http` / `deny --http`, checked as the guard reads it.
pub(crate) fn parse_http_rule(text: &str) -> std::result::Result<String, String> {
    yolo_protocol::http::parse_host_rule(text).map(|_| text.trim().to_string())
}

pub(crate) fn parse_pattern(text: &str) -> std::result::Result<String, String> {
    text.parse::<Pattern>()
        .map(|_| text.trim().to_string())
        .map_err(|e| e.to_string())
}

/// Whether `text` is 1 to `max` lowercase letters, digits and `-`, not starting or ending with
/// `-` (a DNS label; a session's name, which becomes a branch and part of names).
pub(crate) fn is_label(text: &str, max: usize) -> bool {
    (1..=max).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

/// A Kubernetes object name (`--name`, `--pvc`, `--namespace`, `audit --kube`): a DNS label,
/// lowercase letters, digits and `-`, at most 63, starting and ending with a letter or digit.
pub(crate) fn parse_kube_name(text: &str) -> std::result::Result<String, String> {
    if is_label(text, 63) {
        Ok(text.to_string())
    } else {
        Err(format!(
            "\"{text}\" is not a Kubernetes name: use lowercase letters, digits and '-' (at most 63, not starting or ending with '-')"
        ))
    }
}

/// `ADDR[:PORT]`, port 53 by default; IPv6 as `[addr]:port` or bare. A resolver has an address
/// and a port: `0.0.0.0` and `::` (any address) and port 0 (any port) name none.
pub(crate) fn parse_upstream(text: &str) -> std::result::Result<SocketAddr, String> {
    let parsed = text.parse::<SocketAddr>().ok().or_else(|| {
        text.trim_matches(|c| c == '[' || c == ']')
            .parse::<IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, 53))
    });
    match parsed {
        None => Err(format!(
            "\"{text}\" is not an IP address with an optional port, e.g. 192.0.2.53 or 192.0.2.53:5353"
        )),
        Some(addr) if addr.ip().is_unspecified() => Err(format!(
            "\"{text}\": {} means any address, not a resolver; give the resolver's own address, e.g. 192.0.2.53",
            addr.ip()
        )),
        Some(addr) if addr.port() == 0 => Err(format!(
            "\"{text}\": port 0 is no resolver's port; give the port it listens on, or leave the port out for 53"
        )),
        Some(addr) => Ok(addr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_time_or_an_age() {
        let t = parse_since("2026-11-22T10:00:00Z").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-22T10:00:00+00:00");
        let ten_minutes = chrono::Utc::now() - parse_since("10m").unwrap();
        assert!(
            (599..=601).contains(&ten_minutes.num_seconds()),
            "{ten_minutes}"
        );
        assert!(parse_since("2d").is_ok());
        for bad in ["", "10", "m", "10y", "yesterday", "99999999999999999d"] {
            assert!(parse_since(bad).is_err(), "{bad}");
        }
    }
}
