//! What a Dockerfile makes the Docker daemon fetch itself: `ADD <url>` (and `ADD <git repo>`)
//! is downloaded by the daemon on the host's network, not by a RUN step in the guard's
//! namespace, so it goes around the build firewall (a repository could, say, copy the cloud
//! metadata service's answer into the image). Such a source needs the grant `remote-add`.
//!
//! The instructions come from `crate::dockerfile`; the sources of `ADD` (the JSON and shell
//! forms, flags, `ONBUILD`) are read here.

use crate::dockerfile::{first_word, instructions};

/// An `ADD` source the daemon would download: its line (1-based) and the source as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteSource {
    pub(crate) line: usize,
    pub(crate) source: String,
    /// The ADD has `--checksum`.
    pub(crate) checksum: bool,
}

/// A Dockerfile's text (read by the caller, or Compose's `dockerfile_inline`; `shown` names
/// it, `file` is the config or Compose file that names it) asks the daemon to download
/// nothing, or the user grants `remote-add`. With `lowered` (the text goes through
/// `dockerfile_lower`), an `ADD --checksum` of an http(s) URL is downloaded by a RUN step behind
/// the firewall, not by the daemon, so it needs no grant.
pub(crate) fn check_text(
    text: &str,
    shown: &str,
    file: &std::path::Path,
    property: &str,
    grants: &super::Grants,
    lowered: bool,
) -> crate::error::Result<()> {
    if grants.remote_add() {
        return Ok(());
    }
    let Some(first) = remote_adds(text)
        .into_iter()
        .find(|r| !(lowered && r.checksum && r.source.starts_with("http")))
    else {
        return Ok(());
    };
    Err(crate::error::Error::Refused {
        file: file.to_path_buf(),
        property: property.to_string(),
        value: format!(
            "{shown}:{}: ADD {}",
            first.line,
            crate::visible::escape_controls(&first.source)
        ),
        reason: "the Docker daemon downloads an ADD source itself, on the host's network, outside yolo's build firewall; download it in a RUN step instead (curl or wget, behind the firewall)".into(),
        grant: "--grant remote-add".into(),
    })
}

/// Every remote `ADD` source of `text` (also under `ONBUILD`).
pub(crate) fn remote_adds(text: &str) -> Vec<RemoteSource> {
    let mut found = Vec::new();
    for (line, _, instruction) in instructions(text) {
        let mut words = instruction.trim_start();
        let mut keyword = first_word(words);
        if keyword.eq_ignore_ascii_case("onbuild") {
            words = words[keyword.len()..].trim_start();
            keyword = first_word(words);
        }
        if !keyword.eq_ignore_ascii_case("add") {
            continue;
        }
        let args = words[keyword.len()..].trim();
        let checksum = args
            .split_whitespace()
            .take_while(|w| w.starts_with("--"))
            .any(|w| w.to_ascii_lowercase().starts_with("--checksum="));
        for source in sources(args) {
            if is_remote(&source) {
                found.push(RemoteSource {
                    line,
                    source,
                    checksum,
                });
            }
        }
    }
    found
}

/// The sources of `ADD`'s arguments: every path but the last (the destination), flags left
/// out, in the JSON form or the whitespace-separated one.
fn sources(args: &str) -> Vec<String> {
    let mut rest = args;
    loop {
        let word = first_word(rest);
        if !word.starts_with("--") {
            break;
        }
        rest = rest.trim_start()[word.len()..].trim_start();
    }
    let mut paths: Vec<String> = if rest.starts_with('[') {
        serde_json::from_str::<Vec<String>>(rest).unwrap_or_default()
    } else {
        rest.split_whitespace().map(str::to_string).collect()
    };
    paths.pop();
    paths
}

/// A URL of any scheme, or a git remote (`git@host:repo`).
fn is_remote(source: &str) -> bool {
    source.contains("://") || source.starts_with("git@")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources_of(text: &str) -> Vec<(usize, String)> {
        remote_adds(text)
            .into_iter()
            .map(|r| (r.line, r.source))
            .collect()
    }

    fn expect(list: &[(usize, &str)]) -> Vec<(usize, String)> {
        list.iter().map(|(l, s)| (*l, s.to_string())).collect()
    }

    #[test]
    fn remote_adds_are_found_in_every_form() {
        let text = "FROM debian\n\
                    ADD ./local.tar /x/\n\
                    add https://example.com/a.tgz /opt/\n\
                    ADD --chown=1:1 --checksum=sha256:00 http://169.254.169.254/latest/ /meta\n\
                    ADD [\"https://e.com/b\", \"./c\", \"/d/\"]\n\
                    # ADD https://commented.out/ /x\n\
                    ADD \\\n  https://continued.example/z \\\n  /z\n\
                    ONBUILD ADD git@github.com:o/r.git /src\n\
                    COPY https://not-add.example/ /x\n";
        assert_eq!(
            sources_of(text),
            expect(&[
                (3, "https://example.com/a.tgz"),
                (4, "http://169.254.169.254/latest/"),
                (5, "https://e.com/b"),
                (7, "https://continued.example/z"),
                (10, "git@github.com:o/r.git"),
            ])
        );
    }

    #[test]
    fn the_escape_directive_changes_the_continuation() {
        let text = "# escape=`\nFROM x\nADD `\n  https://e.com/a `\n  /a\nADD C:\\dir\\ /b\n";
        assert_eq!(sources_of(text), expect(&[(3, "https://e.com/a")]));
    }

    #[test]
    fn local_sources_and_the_destination_are_not_remote() {
        assert!(remote_adds("FROM x\nADD a b https://dest.example/\nADD . /src\n").is_empty());
    }
}
