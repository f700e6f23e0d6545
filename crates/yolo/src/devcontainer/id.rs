//! `${devcontainerId}` exactly as the spec / reference CLI computes it.
//!
//! The id must match the reference `devcontainer` CLI bit for bit: VS Code and that CLI use it in
//! volume names (`${devcontainerId}` in mounts), so a different value would give the same
//! workspace a second, empty set of volumes. The reference hashes `JSON.stringify` of the id
//! labels with sorted keys and prints the sha256 as a base-32 BigInt padded to 52 digits.

use sha2::{Digest, Sha256};

/// The label naming the devcontainer.json a container was created from.
pub(crate) const CONFIG_FILE_LABEL: &str = "devcontainer.config_file";
/// The label naming the host folder a container was created for.
pub(crate) const LOCAL_FOLDER_LABEL: &str = "devcontainer.local_folder";

/// Digits of JavaScript's `BigInt#toString(32)`.
const BASE32_DIGITS: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";
/// `padStart(52, '0')`: 52 digits of 5 bits hold the 256-bit hash (with 4 bits to spare).
const ID_DIGITS: usize = 52;

/// sha256 of the JSON of the id labels `{"devcontainer.config_file":..,"devcontainer.local_folder":..}`
/// (keys sorted), as a base-32 number padded to 52 digits.
pub(crate) fn devcontainer_id(local_folder: &str, config_file: &str) -> String {
    // Keys in sorted order, no whitespace: what `JSON.stringify(labels, sortedKeys)` produces.
    let json = format!(
        "{{{}:{},{}:{}}}",
        js_json_string(CONFIG_FILE_LABEL),
        js_json_string(config_file),
        js_json_string(LOCAL_FOLDER_LABEL),
        js_json_string(local_folder),
    );
    base32_padded(&Sha256::digest(json.as_bytes()))
}

/// The id of the named session `name` of the workspace whose id is `workspace_id`: sha256 of
/// both (a NUL between them), as 52 base-32 digits like a `devcontainerId`, so nothing keyed by
/// ids can tell it from one and no name gives the workspace's own id.
pub(crate) fn session_id(workspace_id: &str, name: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"yolo session\0");
    hash.update(workspace_id.as_bytes());
    hash.update(b"\0");
    hash.update(name.as_bytes());
    base32_padded(&hash.finalize())
}

/// A string literal as `JSON.stringify` writes it. serde_json's escaping is the same for every
/// Rust string: `"`, `\` and control characters only, `\b\f\n\r\t` short forms, other controls as
/// lowercase `\u00xx`; `/`, DEL, U+2028/9 and non-ASCII are kept as-is. (JavaScript's one extra
/// case, lone surrogates, cannot occur in a `&str`.)
fn js_json_string(s: &str) -> String {
    // Serializing a plain `str` cannot fail; fall back to a hand escape rather than panic anyway.
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// The hash as a big-endian number in base 32, left-padded with '0' to 52 digits.
///
/// Base 32 is 5 bits per digit, so no bignum is needed: the 260 bits of 52 digits are the hash's
/// 256 bits preceded by 4 zero bits, read 5 at a time from the most significant end. A plain
/// `toString(32)` drops leading zeros, and `padStart` puts them back, which gives the same string.
fn base32_padded(hash: &[u8]) -> String {
    let total_bits = ID_DIGITS * 5;
    let lead = total_bits.saturating_sub(hash.len() * 8);
    let bit = |i: usize| -> u8 {
        // Bit `i` of the padded number, counted from the most significant end.
        match i.checked_sub(lead) {
            Some(j) => hash.get(j / 8).map_or(0, |byte| (byte >> (7 - j % 8)) & 1),
            None => 0,
        }
    };
    (0..ID_DIGITS)
        .map(|d| {
            let value = (0..5).fold(0u8, |acc, k| (acc << 1) | bit(d * 5 + k));
            char::from(BASE32_DIGITS[usize::from(value)])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values were computed independently with Node.js 20, exactly as the reference CLI
    // (src/spec-common/variableSubstitution.ts, devcontainerIdForLabels) does:
    //   const labels = {'devcontainer.local_folder': lf, 'devcontainer.config_file': cf};
    //   const s = JSON.stringify(labels, Object.keys(labels).sort());
    //   const h = crypto.createHash('sha256').update(Buffer.from(s, 'utf-8')).digest();
    //   BigInt('0x' + h.toString('hex')).toString(32).padStart(52, '0')

    #[test]
    fn known_answer_plain_paths() {
        assert_eq!(
            devcontainer_id(
                "/home/dev/project",
                "/home/dev/project/.devcontainer/devcontainer.json"
            ),
            "1c4dco2vapormak0onhkm68k89386nego0msnfnr5mv7ej4ueud0"
        );
    }

    #[test]
    fn known_answer_non_ascii_quotes_and_backslashes() {
        assert_eq!(
            devcontainer_id(
                "/tmp/é ü/dir \"q\"\\x/",
                "/tmp/é ü/dir \"q\"\\x/.devcontainer.json"
            ),
            "0mqp2isqmhso8l0fguevem4rnbhn1kmcf1k24jf8qg3f6ggm4o2a"
        );
    }

    #[test]
    fn known_answer_control_characters_del_and_line_separator() {
        assert_eq!(
            devcontainer_id("/a\n\t\u{1}\u{7f}\u{2028}", "/b"),
            "1u40pfm7kufkpq7m2jbmb0q4009i9c3nsr82a67ecc5bvksrlp26"
        );
    }

    #[test]
    fn known_answer_leading_zero_digit_is_padded() {
        // toString(32) of this hash has 51 digits; padStart adds the leading '0'.
        assert_eq!(
            devcontainer_id("", ""),
            "0ggfpocq9c44jcovvn9pqe9eibq1dnovmm8hihntsideg1i49bcn"
        );
    }

    #[test]
    fn label_json_matches_javascript() {
        assert_eq!(
            js_json_string("a/b\u{8}\u{c}\u{1f}é"),
            "\"a/b\\b\\f\\u001fé\""
        );
    }

    #[test]
    fn base32_of_small_and_large_numbers() {
        let mut one = [0u8; 32];
        one[31] = 1;
        assert_eq!(base32_padded(&one), format!("{}1", "0".repeat(51)));
        // 2^256 - 1: the top digit holds 4 padding zeros and one set bit; 51 full digits follow.
        // (Node: ((1n << 256n) - 1n).toString(32))
        assert_eq!(base32_padded(&[0xff; 32]), format!("1{}", "v".repeat(51)));
    }
}
