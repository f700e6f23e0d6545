//! The hash chain of a session log: every line ends with `"chain":"<hex>"`, the SHA-256 of the
//! previous line's chain (empty for a file's first line) and of the line's own bytes without
//! that field. A line changed, removed, inserted or moved after it was written breaks the chain
//! at that line or the next; a writer closing the log writes a `chain_end` record naming how
//! many records it holds, so a cut at the end shows too (`yolo audit verify`).
//!
//! The field is added as text to the serialized line (always its last member), and taken off
//! the same way when checking, so the hash covers exactly the bytes written, whatever JSON
//! library reads them. No key is involved: the chain proves that the file is what its writers
//! wrote as long as nobody rewrote the whole chain from the change onwards, which needs write
//! access to the host's data folder (docs/audit-log.md, "What the chain proves").
//!
//! The functions are pure; [`Appender`], which the CLI's and the guard's writers share so the
//! chain is kept one way, is this crate's one piece of file I/O (std only): it appends under an exclusive
//! `flock` of the file and first catches up with what other processes appended, so two
//! processes writing one file (two `yolo exec`s; a guard restarted in a session) keep one chain.

use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;

/// Where a writer's chain stands in its file: the end it last saw, the lines up to there and
/// the last line's chain.
#[derive(Debug, Default)]
pub struct Appender {
    end: u64,
    lines: u64,
    last: String,
}

impl Appender {
    pub fn new() -> Appender {
        Appender::default()
    }

    /// Append `line` (a serialized record) to `file` (opened for reading and appending), sealed; the bytes
    /// written.
    pub fn append(&mut self, file: &File, line: &[u8]) -> io::Result<usize> {
        self.append_with(file, |_| line.to_vec())
    }

    /// Append the line `make` returns given the number of lines already in the file (for a
    /// `chain_end` record's count), sealed, under the file's lock.
    pub fn append_with(
        &mut self,
        file: &File,
        make: impl FnOnce(u64) -> Vec<u8>,
    ) -> io::Result<usize> {
        let _lock = Lock::take(file)?;
        self.catch_up(file)?;
        let (sealed, hash) = seal(&self.last, &make(self.lines));
        (&*file).write_all(&sealed)?;
        self.end += sealed.len() as u64;
        self.lines += 1;
        self.last = hash;
        Ok(sealed.len())
    }

    /// Read what was appended since this writer last looked (all of it, the first time).
    fn catch_up(&mut self, file: &File) -> io::Result<()> {
        let size = file.metadata()?.len();
        if size < self.end {
            // Cut short by someone: follow on from what is there.
            *self = Appender::default();
        }
        if size == self.end {
            return Ok(());
        }
        let mut new = vec![0u8; (size - self.end) as usize];
        file.read_exact_at(&mut new, self.end)?;
        self.lines += new.iter().filter(|b| **b == b'\n').count() as u64;
        if let Some(hash) = last_chain(&new) {
            self.last = hash;
        }
        self.end = size;
        Ok(())
    }
}

/// An exclusive lock of the file (`File::lock`: `flock` on Linux), released when dropped.
struct Lock<'a>(&'a File);

impl<'a> Lock<'a> {
    fn take(file: &'a File) -> io::Result<Lock<'a>> {
        match file.lock() {
            Ok(()) => Ok(Lock(file)),
            // A file system without locks (some network ones): the records are still written,
            // one writer at a time within this process, as before the chain.
            Err(e)
                if e.kind() == io::ErrorKind::Unsupported || e.raw_os_error() == Some(ENOLCK) =>
            {
                Ok(Lock(file))
            }
            Err(e) => Err(e),
        }
    }
}

/// Linux's "no locks available".
const ENOLCK: i32 = 37;

impl Drop for Lock<'_> {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// The field's text before the hash.
const FIELD: &str = ",\"chain\":\"";
/// How many bytes sealing adds to a line (the field: name, hash and quotes).
pub const SEAL_LEN: usize = FIELD.len() + 64 + 1;

/// `line` (one JSON object, with or without its newline) sealed after `prev` (the previous
/// line's chain, `""` at the start of a file): the line with its `chain` field and newline,
/// and that chain.
pub fn seal(prev: &str, line: &[u8]) -> (Vec<u8>, String) {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let hash = link(prev, body);
    let open = body.strip_suffix(b"}").unwrap_or(body);
    let mut out = Vec::with_capacity(body.len() + FIELD.len() + 68);
    out.extend_from_slice(open);
    // `{}` has no member to follow.
    if open.ends_with(b"{") {
        out.extend_from_slice(&FIELD.as_bytes()[1..]);
    } else {
        out.extend_from_slice(FIELD.as_bytes());
    }
    out.extend_from_slice(hash.as_bytes());
    out.extend_from_slice(b"\"}\n");
    (out, hash)
}

/// The hash of `body` (a line without its `chain` field) after `prev`.
pub fn link(prev: &str, body: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev.as_bytes());
    hasher.update(b"\n");
    hasher.update(body);
    hex::encode(hasher.finalize())
}

/// A sealed line taken apart: the line as it was before sealing, and its chain. `None` when
/// the line has no `chain` field at its end.
pub fn unseal(line: &str) -> Option<(String, &str)> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let rest = line.strip_suffix("\"}")?;
    let (head, hash) = rest.rsplit_once("\"chain\":\"")?;
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let head = head.strip_suffix(',').unwrap_or(head);
    Some((format!("{head}}}"), hash))
}

/// The chain of the last whole line of `tail` (the end of a file), if it has one: where a
/// writer continues.
pub fn last_chain(tail: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(tail.strip_suffix(b"\n")?).ok()?;
    let last = text.rsplit('\n').next()?;
    unseal(last).map(|(_, hash)| hash.to_string())
}

/// What checking one file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every line links to the one before; `closed`: a writer closed it with a `chain_end`
    /// record whose count matches (lines may follow it: a `yolo run` still writing its last
    /// records after `yolo down` closed the session, a guard started again).
    Intact { records: u64, closed: bool },
    /// No line carries a chain (written before yolo sealed its logs).
    Unsealed { records: u64 },
    /// The first line (1-based) that does not follow from the ones before it: it was changed,
    /// or a line before it was removed, or lines were moved.
    Broken { line: u64, why: &'static str },
    /// A `chain_end` record counts more records than precede it, or fewer.
    Miscounted { line: u64, counted: u64, found: u64 },
}

/// Check a whole file's text.
pub fn verify(text: &str) -> Verdict {
    let mut prev = String::new();
    let mut records = 0u64;
    let mut sealed_any = false;
    let mut closed = false;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let number = i as u64 + 1;
        if !line.ends_with('\n') {
            return Verdict::Broken {
                line: number,
                why: "the line is cut short",
            };
        }
        let Some((body, hash)) = unseal(line) else {
            if sealed_any {
                return Verdict::Broken {
                    line: number,
                    why: "the line has no chain",
                };
            }
            records += 1;
            continue;
        };
        // Lines without a chain may come first: a session's file written on by a yolo from
        // before the chain, then by this one (its chain starts afresh, from "").
        sealed_any = true;
        if link(&prev, body.as_bytes()) != hash {
            return Verdict::Broken {
                line: number,
                why: "the line does not follow from the one before it (changed, moved, or one before it removed)",
            };
        }
        prev = hash.to_string();
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(&body) {
            if value["kind"] == "chain_end" {
                let counted = value["records"].as_u64().unwrap_or(u64::MAX);
                if counted != records {
                    return Verdict::Miscounted {
                        line: number,
                        counted,
                        found: records,
                    };
                }
                closed = true;
            }
        }
        records += 1;
    }
    if sealed_any {
        Verdict::Intact { records, closed }
    } else {
        Verdict::Unsealed { records }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(lines: &[&str]) -> String {
        let mut prev = String::new();
        let mut out = String::new();
        for line in lines {
            let (sealed, hash) = seal(&prev, line.as_bytes());
            out.push_str(std::str::from_utf8(&sealed).unwrap());
            prev = hash;
        }
        out
    }

    #[test]
    fn a_sealed_line_is_json_and_unseals_to_what_was_written() {
        let (sealed, hash) = seal("", b"{\"kind\":\"dns\",\"name\":\"a}\\\"\"}\n");
        let text = std::str::from_utf8(&sealed).unwrap();
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(value["chain"], hash.as_str());
        assert_eq!(value["name"], "a}\"");
        let (body, h) = unseal(text).unwrap();
        assert_eq!(body, "{\"kind\":\"dns\",\"name\":\"a}\\\"\"}");
        assert_eq!(h, hash);
        assert_eq!(last_chain(&sealed), Some(hash));
        let (empty, _) = seal("", b"{}");
        assert!(serde_json::from_slice::<serde_json::Value>(&empty).is_ok());
    }

    #[test]
    fn every_kind_of_tampering_is_found_at_its_line() {
        let lines = [
            r#"{"kind":"a","n":1}"#,
            r#"{"kind":"b","n":2}"#,
            r#"{"kind":"c","n":3}"#,
            r#"{"kind":"chain_end","records":3}"#,
        ];
        let good = file(&lines);
        assert_eq!(
            verify(&good),
            Verdict::Intact {
                records: 4,
                closed: true
            }
        );
        let rows: Vec<&str> = good.split_inclusive('\n').collect();
        // Changed.
        let changed = good.replace("\"n\":2", "\"n\":5");
        assert!(matches!(verify(&changed), Verdict::Broken { line: 2, .. }));
        // Removed.
        let removed = [rows[0], rows[2], rows[3]].concat();
        assert!(matches!(verify(&removed), Verdict::Broken { line: 2, .. }));
        // Moved.
        let moved = [rows[1], rows[0], rows[2], rows[3]].concat();
        assert!(matches!(verify(&moved), Verdict::Broken { line: 1, .. }));
        // Cut at the end: no closing record.
        let cut = [rows[0], rows[1]].concat();
        assert_eq!(
            verify(&cut),
            Verdict::Intact {
                records: 2,
                closed: false
            }
        );
        // Cut mid-line.
        let torn = &good[..good.len() - 5];
        assert!(matches!(verify(torn), Verdict::Broken { line: 4, .. }));
        // A closing record that counts wrong.
        let miscounted = file(&[lines[0], r#"{"kind":"chain_end","records":3}"#]);
        assert!(matches!(
            verify(&miscounted),
            Verdict::Miscounted { line: 2, .. }
        ));
        // A cut after the closing record: still closed (what came after it cannot be told).
        let after = file(&[
            lines[0],
            r#"{"kind":"chain_end","records":1}"#,
            r#"{"kind":"late"}"#,
        ]);
        assert_eq!(
            verify(&after),
            Verdict::Intact {
                records: 3,
                closed: true
            }
        );
        // Lines from before the chain, then sealed ones (a yolo upgraded mid-session).
        let upgraded = format!("{{\"old\":1}}\n{}", file(&[lines[0]]));
        assert_eq!(
            verify(&upgraded),
            Verdict::Intact {
                records: 2,
                closed: false
            }
        );
        // Old files: no chain at all.
        assert_eq!(
            verify("{\"a\":1}\n{\"b\":2}\n"),
            Verdict::Unsealed { records: 2 }
        );
    }

    /// Two writers of one file (two processes' handles) keep one chain, and a closing record
    /// counts every line before it.
    #[test]
    fn two_appenders_of_one_file_keep_one_chain() {
        let path = std::env::temp_dir().join(format!("yolo-chain-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .read(true)
                .append(true)
                .open(&path)
                .unwrap()
        };
        let (a, b) = (open(), open());
        let (mut wa, mut wb) = (Appender::new(), Appender::new());
        wa.append(&a, b"{\"kind\":\"x\"}\n").unwrap();
        wb.append(&b, b"{\"kind\":\"y\"}\n").unwrap();
        wa.append(&a, b"{\"kind\":\"z\"}\n").unwrap();
        wb.append_with(&b, |n| {
            format!("{{\"kind\":\"chain_end\",\"records\":{n}}}").into_bytes()
        })
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(
            verify(&text),
            Verdict::Intact {
                records: 4,
                closed: true
            },
            "{text}"
        );
    }
}
