//! Text the repository or the container controls, made safe to print on the host's terminal:
//! every control character (newline and tab too) and the Unicode format characters that reorder
//! or hide text (bidi overrides, zero-width) shown as a visible escape. An ESC sequence in a
//! JSONC comment could otherwise redraw the approval diff into something harmless-looking, or
//! write to the clipboard (OSC 52) and the window title; a newline in a path the agent chose
//! would end yolo's line and start one that looks like yolo's.
//!
//! [`escape_controls`] is the one escaping: everything yolo prints that came from the
//! container or the repository goes through it, value by value, where yolo's own text is put
//! around it. Text of many lines (a diff, a command's output) goes through [`escape_lines`],
//! whose lines each get their own prefix from yolo, and the output of a command through
//! [`escape_output`]. `audit::report::esc` adds HTML's escapes on top.

/// `text` with control and invisible format characters escaped (`\n`, `\x1b`, `\u{202e}`).
pub(crate) fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if is_hiding_format(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Text of several lines (a diff, yolo's own message with a value of the repository in it):
/// each line through [`escape_controls`], the line ends kept. Only for text whose every line
/// yolo prefixes or indents, or whose values were escaped where yolo put them in: a line
/// here can look like any line yolo prints.
pub(crate) fn escape_lines(text: &str) -> String {
    text.split('\n')
        .map(escape_controls)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Output of a command yolo runs on its own behalf (a lifecycle hook), line by line: like
/// [`escape_controls`], but newlines and tabs stay, and so does a carriage return right before
/// a newline (`\r\n`), since it only ends the line. Any other `\r` is escaped: it would
/// return to the line's start and let the rest overwrite what was printed (the hook's name, or
/// a warning).
pub(crate) fn escape_output(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let line_end = c == '\r' && chars.peek() == Some(&'\n');
        if line_end || c == '\n' || c == '\t' {
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
    fn lines_keep_their_ends_and_nothing_else() {
        assert_eq!(
            escape_lines("+a\x1b[2J\n-b\r\tc\n"),
            "+a\\x1b[2J\n-b\\x0d\\tc\n"
        );
    }

    #[test]
    fn a_name_cannot_end_the_line_it_is_printed_in() {
        assert_eq!(
            escape_controls("x\nyolo: nothing changed\t\x1b[2J"),
            "x\\nyolo: nothing changed\\t\\x1b[2J"
        );
    }

    #[test]
    fn escapes_what_a_terminal_would_act_on_and_keeps_the_rest() {
        assert_eq!(
            escape_controls("a\x1b[2K\rb\x07\n\tc"),
            "a\\x1b[2K\\x0db\\x07\\n\\tc"
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
