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
}
