//! Text the repository controls, made safe to print on the host's terminal: every control
//! character except newline and tab, and the Unicode format characters that reorder or hide text
//! (bidi overrides, zero-width), is shown as a visible escape. An ESC sequence in a JSONC comment
//! could otherwise redraw the approval diff into something harmless-looking, or write to the
//! clipboard (OSC 52) and the window title.

/// `text` with control and invisible format characters escaped (`\x1b`, `\u{202e}`).
pub(crate) fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if is_hiding_format(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A name the repository chose (a path, a command line) printed inside one of yolo's own
/// lines: like [`escape_controls`], and a newline or tab is escaped too (`\n`), so that the
/// name cannot end yolo's line and print one that looks like yolo's.
pub(crate) fn escape_name(text: &str) -> String {
    escape_controls(text)
        .replace('\n', "\\n")
        .replace('\t', "\\t")
}

/// Output of a command yolo runs on its own behalf (a lifecycle hook), line by line: like
/// [`escape_controls`], but a carriage return right before a newline (`\r\n`) stays, since it
/// only ends the line. Any other `\r` is escaped: it would return to the line's start and let
/// the rest overwrite what was printed (the hook's name, or a warning).
pub(crate) fn escape_output(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            out.push(c);
        } else {
            out.push_str(&escape_controls(c.encode_utf8(&mut [0; 4])));
        }
    }
    out
}

/// One line of a command's output as yolo prints it on its own behalf: `[name] line`, with the
/// repository's control characters (in the output and in the name) shown as escapes, so a hook
/// cannot write to the clipboard (OSC 52), retitle the window or redraw yolo's own messages.
pub(crate) fn prefixed_line(name: &str, line: &[u8]) -> String {
    let prefix = console::style(format!("[{}]", escape_controls(name))).dim();
    let text = escape_output(&String::from_utf8_lossy(line));
    format!("{prefix} {text}")
}

/// Format characters that change how surrounding text is shown without being seen themselves.
fn is_hiding_format(c: char) -> bool {
    matches!(
        c as u32,
        0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x2069 | 0xFEFF
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_cannot_end_the_line_it_is_printed_in() {
        assert_eq!(
            escape_name("x\nyolo: nothing changed\t\x1b[2J"),
            "x\\nyolo: nothing changed\\t\\x1b[2J"
        );
    }

    #[test]
    fn escapes_what_a_terminal_would_act_on_and_keeps_the_rest() {
        assert_eq!(
            escape_controls("a\x1b[2K\rb\x07\n\tc"),
            "a\\x1b[2K\\x0db\\x07\n\tc"
        );
        assert_eq!(
            escape_controls("\x1b]52;c;ZXZpbA==\x07"),
            "\\x1b]52;c;ZXZpbA==\\x07"
        );
        assert_eq!(
            escape_controls("x\u{202e}y\u{200b}z"),
            "x\\u{202e}y\\u{200b}z"
        );
        assert_eq!(escape_controls("ünïcødé ✓"), "ünïcødé ✓");
        // C1 controls too (a terminal may take \u{9b} as CSI).
        assert_eq!(escape_controls("\u{9b}31m"), "\\x9b31m");
    }

    #[test]
    fn command_output_keeps_its_line_ends_but_no_lone_carriage_return() {
        assert_eq!(
            escape_output("ok\r\n\tnext\rover\x1b]0;title\x07\n"),
            "ok\r\n\tnext\\x0dover\\x1b]0;title\\x07\n"
        );
        assert_eq!(escape_output("\r"), "\\x0d");
    }
}
