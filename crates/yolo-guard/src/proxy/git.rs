//! Git over smart HTTP, as far as the proxy must understand it to hold a push to the
//! repository's own `origin` and to the refs the user names: which requests are pushes
//! ([`wants_push`]), and the ref updates a receive-pack request starts with
//! ([`check_commands`]), read before any byte of the request goes upstream.
//!
//! A push is two requests: `GET /owner/repo(.git)/info/refs?service=git-receive-pack` (the
//! server's refs) and `POST /owner/repo(.git)/git-receive-pack`, whose body is pkt-lines: an
//! optional `shallow <oid>` list, the commands `<old-oid> <new-oid> <ref>\0<capabilities>` then
//! `<old-oid> <new-oid> <ref>`, a flush-pkt `0000`, then the pack.

use super::refusal::Refusal;
use yolo_protocol::http::GitPush;

/// Which step of a push a request is, and to which repository (`/owner/repo`, no `.git`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PushRequest {
    pub repository: String,
    pub step: PushStep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PushStep {
    /// `info/refs?service=git-receive-pack`: the refs advertisement.
    Advertise,
    /// `git-receive-pack`: the commands and the pack.
    Commands,
}

/// Whether a request (its normalized path, its raw query) is a step of a git push, and to
/// which repository. Compared without case (forges route `/O/R/GIT-RECEIVE-PACK` like the
/// lowercase form) and ignoring trailing slashes; the `service` parameter is percent-decoded.
pub(crate) fn wants_push(path: &str, query: Option<&str>) -> Option<PushRequest> {
    let path = path.trim_end_matches('/');
    let (head, last) = path.rsplit_once('/')?;
    if last.eq_ignore_ascii_case("git-receive-pack") {
        return Some(PushRequest {
            repository: repository(head),
            step: PushStep::Commands,
        });
    }
    let (head, info) = head.rsplit_once('/')?;
    let receive_pack = query.is_some_and(|q| {
        q.split('&').any(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            percent_decode(key).eq_ignore_ascii_case("service")
                && percent_decode(value).eq_ignore_ascii_case("git-receive-pack")
        })
    });
    (receive_pack && info.eq_ignore_ascii_case("info") && last.eq_ignore_ascii_case("refs")).then(
        || PushRequest {
            repository: repository(head),
            step: PushStep::Advertise,
        },
    )
}

fn repository(head: &str) -> String {
    let head = head.trim_end_matches('/');
    let head = head
        .len()
        .checked_sub(4)
        .filter(|&cut| head.is_char_boundary(cut) && head[cut..].eq_ignore_ascii_case(".git"))
        .map_or(head, |cut| &head[..cut]);
    head.to_string()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The rule name a git refusal carries.
pub(crate) fn rule_name(forge: &str) -> String {
    format!("http.\"{forge}\".git_push")
}

/// Checks the commands at the start of a receive-pack request body: every ref a command
/// creates, updates or deletes must match `push.refs`. `pkt_lines` is the body up to and
/// including the flush-pkt that ends the commands (more is ignored); a body that ends before
/// it, or that is not pkt-lines (a compressed or signed push), is refused rather than guessed.
/// `ended`: the body holds nothing more than `pkt_lines`.
///
/// A body that is a flush-pkt alone, and nothing after it, passes: git sends it as a probe
/// (of the credentials) before a push too big for its post buffer (`http.postBuffer`, 1 MiB),
/// and a receive-pack with no command changes no ref and reads no pack.
pub(crate) fn check_commands(pkt_lines: &[u8], push: &GitPush, ended: bool) -> Result<(), Refusal> {
    if ended && pkt_lines == FLUSH {
        return Ok(());
    }
    let refuse = |reason: String| Refusal {
        rule: "git_push.refs".into(),
        reason,
        misuse: None,
        lift: None,
        allow_hint: format!(
            "add the ref to git_push.refs (now {}) of the forge in your user config",
            push.refs.join(", ")
        ),
    };
    let mut rest = pkt_lines;
    let mut commands = 0;
    loop {
        let Some(len) = rest.get(..4) else {
            return Err(refuse(
                "the push's commands end before their flush-pkt".into(),
            ));
        };
        let len = std::str::from_utf8(len)
            .ok()
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .filter(|&n| n == 0 || (4..=65520).contains(&n))
            .ok_or_else(|| refuse("the push request is not git pkt-lines".into()))?;
        if len == 0 {
            break;
        }
        let line = rest
            .get(4..len)
            .ok_or_else(|| refuse("the push's commands end inside a pkt-line".into()))?;
        rest = &rest[len..];
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let command = line.split(|&b| b == 0).next().unwrap_or(line);
        let text = std::str::from_utf8(command)
            .map_err(|_| refuse("a push command is not text".into()))?;
        if commands == 0 && text.starts_with("shallow ") {
            continue;
        }
        if text.starts_with("push-cert") {
            return Err(refuse(
                "a signed push (push-cert) cannot be checked by the guard".into(),
            ));
        }
        let mut words = text.split(' ');
        let (Some(old), Some(new), Some(name), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err(refuse(format!("{text:?} is not a push command")));
        };
        if !is_oid(old) || !is_oid(new) {
            return Err(refuse(format!("{text:?} is not a push command")));
        }
        if !push.allows_ref(name) {
            let what = if new.bytes().all(|b| b == b'0') {
                "delete"
            } else {
                "update"
            };
            return Err(Refusal {
                reason: format!(
                    "a push may {what} only {}, not {name}",
                    push.refs.join(", ")
                ),
                ..refuse(String::new())
            });
        }
        commands += 1;
    }
    if commands == 0 {
        return Err(refuse("the push request holds no commands".into()));
    }
    Ok(())
}

/// Whether `body` (the start of a receive-pack request) holds its commands whole: up to the
/// flush-pkt, or far enough to see it is not pkt-lines (which [`check_commands`] refuses).
pub(crate) fn commands_complete(body: &[u8]) -> bool {
    let mut at = 0;
    loop {
        let Some(len) = body.get(at..at + 4) else {
            return false;
        };
        let len = std::str::from_utf8(len)
            .ok()
            .and_then(|h| usize::from_str_radix(h, 16).ok());
        match len {
            Some(0) => return true,
            Some(n) if n >= 4 => at += n,
            // Not a pkt-line length: nothing more to wait for.
            _ => return true,
        }
    }
}

/// The flush-pkt, which ends the commands.
const FLUSH: &[u8] = b"0000";

/// A SHA-1 or SHA-256 object name in lowercase hex.
fn is_oid(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "1111111111111111111111111111111111111111";
    const NEW: &str = "2222222222222222222222222222222222222222";
    const ZERO: &str = "0000000000000000000000000000000000000000";

    fn pkt(line: &str) -> Vec<u8> {
        let mut out = format!("{:04x}", line.len() + 4).into_bytes();
        out.extend_from_slice(line.as_bytes());
        out
    }

    /// A receive-pack body as git writes it: commands, flush, then (here, fake) pack bytes.
    fn body(commands: &[(&str, &str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, (old, new, name)) in commands.iter().enumerate() {
            let caps = if i == 0 {
                "\0report-status side-band-64k object-format=sha1 agent=git/2.43"
            } else {
                ""
            };
            out.extend(pkt(&format!("{old} {new} {name}{caps}\n")));
        }
        out.extend_from_slice(b"0000PACK\x00\x00\x00\x02");
        out
    }

    #[test]
    fn pushes_are_told_from_fetches_whatever_their_spelling() {
        let push = |path, query| wants_push(path, query);
        let commands = |repo: &str| {
            Some(PushRequest {
                repository: repo.into(),
                step: PushStep::Commands,
            })
        };
        assert_eq!(push("/o/r.git/git-receive-pack", None), commands("/o/r"));
        assert_eq!(push("/o/r/git-receive-pack", None), commands("/o/r"));
        assert_eq!(push("/o/r.GIT/Git-Receive-Pack/", None), commands("/o/r"));
        assert_eq!(
            push("/group/sub/r.git/git-receive-pack", None),
            commands("/group/sub/r")
        );
        let advertise = Some(PushRequest {
            repository: "/o/r".into(),
            step: PushStep::Advertise,
        });
        assert_eq!(
            push("/o/r.git/info/refs", Some("service=git-receive-pack")),
            advertise
        );
        assert_eq!(
            push("/o/r/info/refs", Some("x=1&service=git%2Dreceive%2Dpack")),
            advertise
        );
        // Fetches are not pushes.
        assert_eq!(push("/o/r.git/git-upload-pack", None), None);
        assert_eq!(
            push("/o/r.git/info/refs", Some("service=git-upload-pack")),
            None
        );
        assert_eq!(push("/o/r.git/info/refs", None), None);
        assert_eq!(push("/", None), None);
    }

    #[test]
    fn commands_to_the_named_refs_pass() {
        let push = GitPush::new("/o/r");
        let ok = body(&[
            (ZERO, NEW, "refs/heads/yolo/x"),
            (OLD, NEW, "refs/heads/yolo/a/b"),
            (OLD, ZERO, "refs/heads/yolo/old"),
        ]);
        assert_eq!(check_commands(&ok, &push, false), Ok(()));
        // A shallow clone's push starts with shallow lines.
        let mut shallow = pkt(&format!("shallow {OLD}"));
        shallow.extend(body(&[(OLD, NEW, "refs/heads/yolo/x")]));
        assert_eq!(check_commands(&shallow, &push, false), Ok(()));
    }

    #[test]
    fn a_push_to_another_ref_is_refused_even_among_allowed_ones() {
        let push = GitPush::new("/o/r");
        let main = body(&[
            (OLD, NEW, "refs/heads/yolo/x"),
            (OLD, NEW, "refs/heads/main"),
        ]);
        let refusal = check_commands(&main, &push, false).unwrap_err();
        assert_eq!(
            refusal.reason,
            "a push may update only refs/heads/yolo/**, not refs/heads/main"
        );
        assert!(
            refusal.body().contains("git_push.refs"),
            "{}",
            refusal.body()
        );
        let delete = body(&[(OLD, ZERO, "refs/heads/main")]);
        let refusal = check_commands(&delete, &push, false).unwrap_err();
        assert!(refusal.reason.contains("may delete only"), "{refusal:?}");
        let tag = body(&[(ZERO, NEW, "refs/tags/yolo/v1")]);
        assert!(check_commands(&tag, &push, false).is_err());
        // The user's own refs list opens them.
        let wide = GitPush {
            repository: "/o/r".into(),
            refs: vec!["refs/heads/**".into()],
        };
        assert_eq!(check_commands(&main, &wide, false), Ok(()));
    }

    #[test]
    fn gits_probe_before_a_big_push_passes_alone() {
        let push = GitPush::new("/o/r");
        assert_eq!(check_commands(b"0000", &push, true), Ok(()));
    }

    #[test]
    fn what_cannot_be_read_as_commands_is_refused() {
        let push = GitPush::new("/o/r");
        let full = body(&[(OLD, NEW, "refs/heads/yolo/x")]);
        let flush = full.windows(4).position(|w| w == b"0000").unwrap();
        for (bytes, why) in [
            (&full[..flush], "end before their flush-pkt"),
            (&full[..10], "end inside a pkt-line"),
            (&b"\x1f\x8b\x08\x00gzip"[..], "not git pkt-lines"),
            (&b"0000"[..], "holds no commands"),
            (&b"0003"[..], "not git pkt-lines"),
        ] {
            let refusal = check_commands(bytes, &push, false).unwrap_err();
            assert!(refusal.reason.contains(why), "{why}: {refusal:?}");
        }
        // Not even git's probe, but whole: a flush-pkt with more after it, or not known to end.
        assert!(check_commands(b"0000PACK", &push, true).is_err());
        assert!(check_commands(b"0000", &push, false).is_err());
        let cert = [pkt("push-cert\0report-status\n"), b"0000".to_vec()].concat();
        assert!(check_commands(&cert, &push, false)
            .unwrap_err()
            .reason
            .contains("signed push"));
        let junk = [pkt("hello world refs/heads/yolo/x\n"), b"0000".to_vec()].concat();
        assert!(check_commands(&junk, &push, false).is_err());
        // A second command line that is shallow is not skipped: it is no command.
        let late = [
            body(&[(OLD, NEW, "refs/heads/yolo/x")])[..flush].to_vec(),
            pkt(&format!("shallow {OLD}")),
            b"0000".to_vec(),
        ]
        .concat();
        assert!(check_commands(&late, &push, false).is_err());
    }
}
