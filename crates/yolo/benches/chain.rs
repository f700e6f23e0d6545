//! What the hash chain costs a writer (docs/performance.md, "The hash chain's cost"): one
//! exec record of a typical size appended to a log file, sealed (`chain::Appender`: the file's
//! lock, a look at what others appended, SHA-256, the write) against the floor measured in the
//! same run, the same line appended with one `write` to a file opened for appending, as the
//! writers did before the chain.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::fs::{File, OpenOptions};
use std::io::Write;
use yolo_protocol::chain::Appender;

/// An exec record as the guard writes one (about 600 bytes).
fn record(n: u64) -> Vec<u8> {
    format!(
        r#"{{"ts":"2026-11-28T05:50:56.029601223Z","session":"20261128T055053Z-1fc32774","kind":"exec","id":{n},"pid":53,"ppid":1,"uid":1000,"gid":1000,"path":"/usr/bin/git","exe":"/usr/bin/git","argv":["git","-c","core.pager=cat","log","--oneline","-n","20","--","src/main.rs"],"cwd":"/workspaces/repo","result":"ok","sha256":"f5adb8bf0100ed0f8c7782ca5f92814e9229525a4b4e0d401cf3bea09ac960a6","exit_code":null,"duration_ms":null,"argv_rewritten":false,"loader":[],"signals_pending":0}}"#
    )
    .into_bytes()
}

fn open(dir: &tempfile::TempDir, name: &str) -> File {
    OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(dir.path().join(name))
        .unwrap()
}

fn append(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let line = record(1);
    let mut group = c.benchmark_group("append an exec record");
    group.throughput(Throughput::Elements(1));
    let plain = open(&dir, "plain.jsonl");
    let mut with_newline = line.clone();
    with_newline.push(b'\n');
    group.bench_function("plain write (floor)", |b| {
        b.iter(|| (&plain).write_all(&with_newline).unwrap())
    });
    let sealed = open(&dir, "sealed.jsonl");
    let mut appender = Appender::new();
    group.bench_function("sealed (hash chain)", |b| {
        b.iter(|| appender.append(&sealed, &line).unwrap())
    });
    group.finish();
}

criterion_group!(benches, append);
criterion_main!(benches);
