//! A Dockerfile's instructions, as much of the format as yolo reads: the escape directive, line
//! continuations, comments and empty lines. `policy` looks for `ADD` sources in them, `ca` puts
//! its lines after every `FROM`.
//!
//! Written by hand: the instructions that matter are a small part of the format, and no
//! maintained Rust crate parses Dockerfiles into instructions with their lines.

/// The line (1-based) each `FROM` instruction ends on, continuations included.
pub(crate) fn from_instruction_ends(text: &str) -> Vec<usize> {
    instructions(text)
        .into_iter()
        .filter(|(_, _, body)| first_word(body.trim_start()).eq_ignore_ascii_case("from"))
        .map(|(_, end, _)| end)
        .collect()
}

pub(crate) fn first_word(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or("")
}

/// The escape character: `\`, or the one an `# escape=` parser directive at the top names.
fn escape_char(text: &str) -> char {
    for line in text.lines() {
        let trimmed = line.trim();
        let Some(directive) = trimmed.strip_prefix('#') else {
            break;
        };
        let Some((key, value)) = directive.split_once('=') else {
            break;
        };
        if key.trim().eq_ignore_ascii_case("escape") {
            if let Some(c) = value.trim().chars().next() {
                return c;
            }
        }
    }
    '\\'
}

/// The instructions with the lines each starts and ends on: continuation lines joined, comment
/// lines (also inside a continuation) and empty lines dropped.
pub(crate) fn instructions(text: &str) -> Vec<(usize, usize, String)> {
    let escape = escape_char(text);
    let mut out = Vec::new();
    let mut current: Option<(usize, usize, String)> = None;
    for (index, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_none()) {
            continue;
        }
        let (body, continues) = match trimmed.strip_suffix(escape) {
            Some(body) => (body, true),
            None => (trimmed, false),
        };
        let entry = current.get_or_insert_with(|| (index + 1, index + 1, String::new()));
        entry.1 = index + 1;
        entry.2.push(' ');
        entry.2.push_str(body);
        if !continues {
            out.extend(current.take());
        }
    }
    out.extend(current);
    out
}
