//! What of a container's terminal output reaches the host's terminal. The agent decides the
//! bytes `yolo run`, `yolo shell`, `yolo exec` and `yolo replay` write there, and a terminal
//! does more with some of them than draw: OSC 52 puts text on the clipboard (a command the user
//! then pastes), OSC 0/2 retitle the window, OSC 8 makes text a link to somewhere else, DCS, APC
//! and PM strings reach the terminal's own extensions (tmux passthrough, file transfer,
//! graphics), and queries (CSI 6n, DECRQSS, CSI 21t) make the terminal type an answer, which
//! lands in the host's shell when it comes after yolo returned.
//!
//! [`Screen`] passes what only draws (text, colours, cursor movement, screen modes) and stops
//! the rest: dropped on the live terminal, shown as visible escapes in a replay. It works as the
//! bytes come: a sequence split over two reads is held until its end (at most
//! [`MAX_SEQUENCE`] bytes of it), and text is never held.
//!
//! The parsing is anstyle-parse's table of the DEC parser (Paul Williams' state machine, the one
//! vte implements); which sequences reach past the screen is decided here. Deliberately not a
//! terminal emulator: what a sequence does to the screen (clear it, move the cursor) is the
//! agent's to do, and [`RESET`] undoes the state it may leave behind.

use anstyle_parse::state::{state_change, Action, State};

/// What is done with a sequence that reaches past the screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Left out (the live terminal: the output goes on as if it had not been there).
    Drop,
    /// Shown as text, its control characters escaped (`yolo replay`: the reviewer sees it).
    Show,
}

/// The most of one sequence that is kept to pass it or show it; a longer one is stopped (no
/// sequence that only draws is that long), and past this its bytes are not kept.
pub(crate) const MAX_SEQUENCE: usize = 4096;

/// How much of a stopped sequence a replay shows.
const SHOWN: usize = 160;

/// yolo's own reset of the terminal after an attached command, and before its own words after
/// the agent's output: any sequence the agent left open ended (CAN, ST), the soft reset
/// (DECSTR: colours, scroll margins, origin and insert mode, charsets, keypad, cursor shown),
/// the alternate screen left (1047, which unlike 1049 does not move the cursor), line wrap back on (DECSTR turns it off), mouse, focus and
/// bracketed-paste reports off (else the host's shell reads them as typed text), plain text,
/// and no open hyperlink.
pub(crate) const RESET: &str = concat!(
    "\x18\x1b\\",
    "\x1b[!p",
    "\x1b[?1047l",
    "\x1b[?7h\x1b[?25h",
    "\x1b[?9l\x1b[?1000l\x1b[?1001l\x1b[?1002l\x1b[?1003l\x1b[?1004l",
    "\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?2004l",
    "\x1b[0m\x1b(B\x0f",
    "\x1b]8;;\x1b\\",
);

/// Which kind of sequence is being read, from its introducer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `ESC` and intermediates and a final byte.
    Escape,
    Csi,
    Osc,
    Dcs,
    /// SOS, PM and APC: strings the terminal hands to its extensions.
    Hidden,
}

/// The filter of one output stream; see the module's docs.
pub(crate) struct Screen {
    stop: Stop,
    /// The parser's state; [`State::Utf8`] while a character's bytes come.
    state: State,
    /// The bytes of the character being read.
    utf8: Vec<u8>,
    /// The bytes of the sequence being read, from its introducer, up to [`MAX_SEQUENCE`].
    seq: Vec<u8>,
    /// Bytes of the sequence were not kept (past the cap).
    cut: bool,
    kind: Kind,
    /// How many sequences were stopped.
    stopped: u64,
}

impl Screen {
    pub(crate) fn new(stop: Stop) -> Screen {
        Screen {
            stop,
            state: State::Ground,
            utf8: Vec::new(),
            seq: Vec::new(),
            cut: false,
            kind: Kind::Escape,
            stopped: 0,
        }
    }

    /// How many sequences were stopped so far.
    pub(crate) fn stopped(&self) -> u64 {
        self.stopped
    }

    /// `input` as it may reach the host's terminal, appended to `out`. What ends inside a
    /// sequence or a character waits for the next call.
    pub(crate) fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &byte in input {
            self.byte(byte, out);
        }
    }

    /// The stream ended: a sequence left open is stopped, since the terminal would finish it
    /// with what is written next (yolo's own words); a cut character is replaced.
    pub(crate) fn end(&mut self, out: &mut Vec<u8>) {
        if self.state == State::Utf8 {
            self.utf8.clear();
            out.extend_from_slice("\u{fffd}".as_bytes());
        } else if self.state != State::Ground {
            let seq = std::mem::take(&mut self.seq);
            self.stop(&seq, true, out);
        }
        self.state = State::Ground;
        self.cut = false;
    }

    fn byte(&mut self, byte: u8, out: &mut Vec<u8>) {
        match self.state {
            State::Utf8 => self.utf8_byte(byte, out),
            State::Ground => self.ground(byte, out),
            _ => self.in_sequence(byte, out),
        }
    }

    fn ground(&mut self, byte: u8, out: &mut Vec<u8>) {
        let (next, action) = state_change(State::Ground, byte);
        match (next, action) {
            (_, Action::BeginUtf8) => {
                self.state = State::Utf8;
                self.utf8.clear();
                self.utf8.push(byte);
            }
            (State::Anywhere | State::Ground, Action::Print) => out.push(byte),
            // ENQ makes the terminal send its answerback message.
            (State::Anywhere | State::Ground, Action::Execute) if byte == 0x05 => {
                self.stop(&[byte], false, out)
            }
            // A lone byte 0x80..=0xff is not UTF-8: C1 controls in 8-bit form (CSI as 0x9b)
            // and stray bytes, none of which text needs.
            (State::Anywhere | State::Ground, _) if byte >= 0x80 => self.stop(&[byte], false, out),
            (State::Anywhere | State::Ground, _) => out.push(byte),
            (next, _) => self.start(&[byte], next, Kind::Escape),
        }
    }

    fn utf8_byte(&mut self, byte: u8, out: &mut Vec<u8>) {
        let len = match self.utf8[0] {
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            _ => 4,
        };
        if !(0x80..=0xbf).contains(&byte) {
            // Not a continuation: the character is broken, and this byte starts afresh.
            self.utf8.clear();
            out.extend_from_slice("\u{fffd}".as_bytes());
            self.state = State::Ground;
            return self.ground(byte, out);
        }
        self.utf8.push(byte);
        if self.utf8.len() < len {
            return;
        }
        let raw = std::mem::take(&mut self.utf8);
        self.state = State::Ground;
        match std::str::from_utf8(&raw)
            .ok()
            .and_then(|s| s.chars().next())
        {
            // A C1 control written as a character: terminals that take it as one would start
            // a sequence with it (U+009B is CSI), so it is read as the 8-bit code.
            Some(c) if ('\u{80}'..='\u{9f}').contains(&c) => self.c1(c as u8, &raw, out),
            Some(_) => out.extend_from_slice(&raw),
            None => out.extend_from_slice("\u{fffd}".as_bytes()),
        }
    }

    /// A C1 control: the introducers start their sequence, the rest are stopped (NEL, SCI and
    /// the like draw nothing text needs, and DECID makes the terminal answer).
    fn c1(&mut self, code: u8, raw: &[u8], out: &mut Vec<u8>) {
        let (state, kind) = match code {
            0x9b => (State::CsiEntry, Kind::Csi),
            0x9d => (State::OscString, Kind::Osc),
            0x90 => (State::DcsEntry, Kind::Dcs),
            0x98 | 0x9e | 0x9f => (State::SosPmApcString, Kind::Hidden),
            _ => return self.stop(raw, false, out),
        };
        self.start(raw, state, kind);
    }

    fn start(&mut self, raw: &[u8], state: State, kind: Kind) {
        self.seq.clear();
        self.seq.extend_from_slice(raw);
        self.cut = false;
        self.state = state;
        self.kind = kind;
    }

    fn in_sequence(&mut self, byte: u8, out: &mut Vec<u8>) {
        let string = matches!(
            self.state,
            State::OscString | State::DcsPassthrough | State::DcsIgnore | State::SosPmApcString
        );
        if string && byte == 0x9c && self.seq.last() == Some(&0xc2) {
            // U+009C, the C1 ST as a character: a UTF-8 terminal ends the string there.
            self.keep(byte);
            return self.finish(false, out);
        }
        let (next, action) = state_change(self.state, byte);
        if next == State::Anywhere {
            // An action in place (a C0 control the terminal runs inside the sequence).
            return self.keep(byte);
        }
        if next == State::Escape {
            // ESC ends what came before (a string's ST is read as the next sequence, `ESC \`).
            self.finish(false, out);
            return self.start(&[byte], State::Escape, Kind::Escape);
        }
        self.keep(byte);
        if self.kind == Kind::Escape {
            self.kind = match next {
                State::CsiEntry => Kind::Csi,
                State::OscString => Kind::Osc,
                State::DcsEntry => Kind::Dcs,
                State::SosPmApcString => Kind::Hidden,
                _ => Kind::Escape,
            };
        }
        self.state = next;
        if next == State::Ground {
            let dispatched = matches!(action, Action::CsiDispatch | Action::EscDispatch);
            self.finish(dispatched, out);
        }
    }

    fn keep(&mut self, byte: u8) {
        if self.seq.len() < MAX_SEQUENCE {
            self.seq.push(byte);
        } else {
            self.cut = true;
        }
    }

    /// The sequence read so far ended: passed, or stopped. One that ended without its final
    /// byte (a new ESC, CAN, SUB) is stopped: passed, its start would join with what comes
    /// next into a sequence nobody looked at.
    fn finish(&mut self, dispatched: bool, out: &mut Vec<u8>) {
        let seq = std::mem::take(&mut self.seq);
        let cut = std::mem::take(&mut self.cut);
        if cut || !dispatched || reaches_host(self.kind, &seq) {
            self.stop(&seq, cut, out);
        } else {
            out.extend_from_slice(&seq);
        }
        self.state = State::Ground;
    }

    fn stop(&mut self, seq: &[u8], cut: bool, out: &mut Vec<u8>) {
        self.stopped += 1;
        if self.stop == Stop::Show {
            let text = String::from_utf8_lossy(&seq[..seq.len().min(SHOWN)]);
            out.extend_from_slice(crate::visible::escape_controls(&text).as_bytes());
            if cut || seq.len() > SHOWN {
                out.extend_from_slice("…".as_bytes());
            }
        }
    }
}

/// Whether a whole sequence does more than draw on the screen.
fn reaches_host(kind: Kind, seq: &[u8]) -> bool {
    match kind {
        Kind::Osc | Kind::Dcs | Kind::Hidden => true,
        Kind::Csi => {
            // After the introducer (`ESC [`, or the C1 CSI as a character); the C0 controls the
            // terminal runs in place are no part of it.
            let skip = if seq.first() == Some(&0x1b) { 2 } else { 0 };
            let body: Vec<u8> = seq
                .iter()
                .skip(skip)
                .copied()
                .filter(|b| *b >= 0x20)
                .collect();
            let body = if skip == 0 {
                body.get(2..).unwrap_or_default().to_vec()
            } else {
                body
            };
            let Some((&last, rest)) = body.split_last() else {
                return false;
            };
            // Ended by CAN or SUB rather than a final byte: the terminal drops it too.
            if !(0x40..=0x7e).contains(&last) {
                return false;
            }
            let private = rest.first().copied().filter(|b| b"<=>?".contains(b));
            let intermediates: Vec<u8> = rest
                .iter()
                .copied()
                .filter(|b| (0x20..=0x2f).contains(b))
                .collect();
            csi_reaches_host(private, &intermediates, last)
        }
        Kind::Escape => {
            let body: Vec<u8> = seq.iter().skip(1).copied().filter(|b| *b >= 0x20).collect();
            let Some((&last, intermediates)) = body.split_last() else {
                return false;
            };
            esc_reaches_host(intermediates, last)
        }
    }
}

/// CSI sequences that make the terminal answer or act outside the screen. The answers are
/// typed into whatever reads the terminal next, the host's shell once yolo returned.
fn csi_reaches_host(private: Option<u8>, intermediates: &[u8], last: u8) -> bool {
    match (last, intermediates) {
        // Status and cursor reports (DSR, CSI 6n), device attributes (DA), window operations
        // (move, resize, iconify, the title and size reports, CSI 21t), media copy (print).
        (b'n' | b'c' | b't' | b'i', _) => true,
        // DECREQTPARM; DECRQM (a mode's state); DECRQPSR, DECRQTSR, DECRQUPSS (state reports);
        // DECRQCRA (a checksum of what is on the screen); DECRQLP (the locator's position).
        (b'x', []) | (b'p', b"$") | (b'w', b"$") | (b'u', b"$" | b"&") | (b'y', b"*") => true,
        (b'|', b"'") => true,
        // XTVERSION, the kitty keyboard query, XTQMODKEYS, XTSMGRAPHICS.
        (b'q', []) => private == Some(b'>'),
        (b'u' | b'm' | b'S', []) => private == Some(b'?'),
        _ => false,
    }
}

/// ESC sequences that make the terminal answer (DECID) or read later text differently: DOCS
/// (`ESC %`) can leave UTF-8, after which bytes of ordinary characters are C1 controls.
/// An ST (`ESC \`) on its own is stopped too: it ends the strings, which are all stopped.
fn esc_reaches_host(intermediates: &[u8], last: u8) -> bool {
    matches!(
        (intermediates, last),
        ([], b'Z') | ([], b'\\') | ([b'%', ..], _)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(chunks: &[&[u8]]) -> (Vec<u8>, u64) {
        let mut screen = Screen::new(Stop::Drop);
        let mut out = Vec::new();
        for chunk in chunks {
            screen.push(chunk, &mut out);
        }
        screen.end(&mut out);
        (out, screen.stopped())
    }

    fn shown(input: &[u8]) -> String {
        let mut screen = Screen::new(Stop::Show);
        let mut out = Vec::new();
        screen.push(input, &mut out);
        screen.end(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn what_only_draws_passes_unchanged() {
        let text: &[u8] = "plain ünïcødé ✓ 🦀\r\n\t\x1b[1;31mred\x1b[0m \x1b[2J\x1b[H\x1b[?1049h\x1b[?25l\x1b[10;20r\x1b(0q\x1b(B\x1b7\x1b8\x07\x1b[38:2:1:2:3m\x1b[ q\x1b[!p"
            .as_bytes();
        assert_eq!(live(&[text]), (text.to_vec(), 0));
    }

    #[test]
    fn host_affecting_sequences_are_dropped_live() {
        for attack in [
            &b"\x1b]52;c;ZWNobyBwd25lZAo=\x07"[..],
            b"\x1b]52;c;ZWNobyBwd25lZAo=\x1b\\",
            b"\x1b]0;innocent title\x07",
            b"\x1b]2;t\x1b\\",
            b"\x1b]8;;https://evil.test/\x1b\\",
            b"\x1b]1337;File=name=eA==:eA==\x07",
            b"\x1bP$qm\x1b\\",
            b"\x1bPtmux;\x1b\x1b]52;c;eA==\x07\x1b\\",
            b"\x1b_Gf=100;AAAA\x1b\\",
            b"\x1b^pm\x1b\\",
            b"\x1bXsos\x1b\\",
            b"\x1b[6n",
            b"\x1b[?6n",
            b"\x1b[c",
            b"\x1b[>c",
            b"\x1b[21t",
            b"\x1b[8;100;100t",
            b"\x1b[?2004$p",
            b"\x1b[>q",
            b"\x1b[1;1;1;1;1*y",
            b"\x1b[5i",
            b"\x1bZ",
            b"\x1b%@",
            b"\x05",
            // C1 controls, in 8-bit form and written as characters.
            b"\x9b6n",
            "\u{9b}6n".as_bytes(),
            "\u{9d}52;c;eA==\u{9c}".as_bytes(),
            "\u{90}$qm\u{9c}".as_bytes(),
        ] {
            let mut input = b"before ".to_vec();
            input.extend_from_slice(attack);
            input.extend_from_slice(b" after");
            let (out, stopped) = live(&[&input]);
            let text = String::from_utf8_lossy(&out);
            assert!(stopped >= 1, "{attack:?} passed: {text:?}");
            assert!(
                text.starts_with("before ") && text.ends_with(" after"),
                "{attack:?}: {text:?}"
            );
            assert!(
                !out.contains(&0x1b) && !text.contains("52;") && !text.contains('\u{9b}'),
                "{attack:?}: {text:?}"
            );
        }
    }

    /// A sequence split over reads is still one sequence; text before it is not held.
    #[test]
    fn a_sequence_split_over_reads_is_still_stopped_and_text_is_not_held() {
        let input = b"ab\x1b]52;c;ZXZpbA==\x07cd\x1b[6ne";
        for cut in 1..input.len() {
            let (out, stopped) = live(&[&input[..cut], &input[cut..]]);
            assert_eq!(
                (out.as_slice(), stopped),
                (&b"abcde"[..], 2),
                "cut at {cut}"
            );
        }
        // Byte by byte, too.
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(live(&bytes).0, b"abcde");
        // Text is out at once; only the open sequence waits.
        let mut screen = Screen::new(Stop::Drop);
        let mut out = Vec::new();
        screen.push(b"hello \x1b]52;c;", &mut out);
        assert_eq!(out, b"hello ");
        screen.push("é\u{1F980}".as_bytes(), &mut out);
        assert_eq!(out, b"hello ");
        // A character split over reads waits for its last byte, nothing else.
        let mut screen = Screen::new(Stop::Drop);
        let mut out = Vec::new();
        screen.push(b"x\xc3", &mut out);
        assert_eq!(out, b"x");
        screen.push(b"\xa9", &mut out);
        assert_eq!(out, "xé".as_bytes());
    }

    /// An endless sequence is not kept in memory, and a sequence left open at the end does
    /// not swallow what yolo writes next.
    #[test]
    fn an_endless_or_unfinished_sequence_is_stopped() {
        let mut screen = Screen::new(Stop::Drop);
        let mut out = Vec::new();
        screen.push(b"\x1b]52;c;", &mut out);
        for _ in 0..1000 {
            screen.push(&[b'A'; 4096], &mut out);
        }
        assert!(screen.seq.len() <= MAX_SEQUENCE && out.is_empty());
        screen.push(b"\x07ok", &mut out);
        assert_eq!(out, b"ok");
        // A CSI that never ends is not passed either.
        let long = [b"\x1b[".as_slice(), &[b'1'; 2 * MAX_SEQUENCE], b"m"].concat();
        assert_eq!(live(&[&long]).0, b"");
        assert_eq!(live(&[b"x\x1b[3"]), (b"x".to_vec(), 1));
        assert_eq!(live(&[b"x\x1b"]).0, b"x");
    }

    #[test]
    fn a_broken_character_does_not_hide_a_sequence() {
        let (out, stopped) = live(&[b"a\xc3\x1b]52;c;eA==\x07b\xff\x9bc"]);
        assert_eq!(String::from_utf8_lossy(&out), "a\u{fffd}bc");
        assert_eq!(stopped, 3);
    }

    #[test]
    fn a_replay_shows_what_it_stops() {
        assert_eq!(
            shown(b"ls\x1b]52;c;ZXZpbA==\x07\x1b[1mok\x1b[0m\x1b[6n"),
            "ls\\x1b]52;c;ZXZpbA==\\x07\x1b[1mok\x1b[0m\\x1b[6n"
        );
        let long = shown(&[b"\x1b]0;".as_slice(), &[b'x'; 10_000], b"\x07"].concat());
        assert!(long.ends_with('…') && long.len() < 200, "{long}");
    }
}
