//! A Dockerfile front end: the BuildKit-only syntax that real repositories use, lowered to
//! instructions Docker's classic builder runs, before the build.
//!
//! Why lowering and not BuildKit: yolo's build firewall puts a build's RUN steps in the guard's
//! network namespace (`networkmode: container:<guard>`), which the classic builder honours and
//! BuildKit does not (its RUN steps get the host's network, a namespace of their own or none,
//! never another container's); BuildKit through the Engine API also needs a gRPC session and,
//! for `# syntax=`, a front-end image pulled from a registry. So BuildKit's syntax is rewritten
//! into classic instructions that keep every RUN step behind the guard:
//! - `# syntax=docker/dockerfile:…`: dropped (the classic builder is the front end);
//! - heredocs: `RUN <<EOF` scripts are written into the RUN line (as `printf %b` text the shell
//!   `eval`s, so the stage's `SHELL` runs them as BuildKit would), `COPY <<EOF` files become files
//!   of the build context that yolo adds to the tar it sends (never to the user's tree);
//! - `RUN --mount`: `type=cache`/`tmpfs` dropped (the step runs without the cache), `type=bind`
//!   a COPY of the same files before the step, `type=secret`/`ssh` dropped as BuildKit does when
//!   no secret is passed (refused with `required=true`);
//! - `RUN --network`/`--security`: dropped, the step runs behind the firewall like every other;
//! - `COPY --link`: a plain COPY; `COPY/ADD --chmod`: the context's files added to the tar
//!   again with that mode and copied from there;
//! - `ADD --checksum=<digest> <url>`: a RUN step that downloads with the image's curl or wget,
//!   behind the firewall, and checks the digest (so it needs no `remote-add` grant).
//!
//! What is not lowered is refused before the build, each use named with its line.

use std::fmt::Write as _;

/// A Dockerfile, lowered: the text for the classic builder, files it copies from the context
/// (added to the context's tar under [`FILES_DIR`]), and what was dropped, to tell the user.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Lowered {
    pub(crate) text: String,
    pub(crate) files: Vec<ContextFile>,
    pub(crate) notes: Vec<String>,
    /// Whether anything BuildKit-only was found (else `text` is not used: the original is sent).
    pub(crate) changed: bool,
    /// The lines of the instructions (and parser directives) that use BuildKit syntax.
    pub(crate) uses: Vec<usize>,
}

/// A file the lowered Dockerfile copies from the context, added to the tar by the caller.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ContextFile {
    /// Its path in the tar.
    pub(crate) name: String,
    pub(crate) content: Content,
    /// The mode every file and folder gets (`--chmod`); else the file's own (heredocs: 0644).
    pub(crate) mode: Option<u32>,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Content {
    /// A heredoc's text.
    Data(Vec<u8>),
    /// A file or folder of the context (relative to its root, `/`-separated), copied again
    /// with another mode; the caller checks it stays inside the context.
    Context(String),
}

/// A use of BuildKit syntax that yolo does not lower: its line (1-based) and what it is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct NotLowered {
    pub(crate) line: usize,
    pub(crate) what: String,
}

/// Where the lowered Dockerfile's extra files live in the context's tar.
pub(crate) const FILES_DIR: &str = ".yolo-lowered";

/// The name of the lowered Dockerfile in the context's tar.
pub(crate) const DOCKERFILE: &str = ".yolo-lowered.Dockerfile";

/// One logical instruction: its first and last line, the joined text, heredoc bodies.
struct Instruction {
    line: usize,
    text: String,
    heredocs: Vec<Heredoc>,
}

#[derive(Debug, Clone)]
struct Heredoc {
    /// The word as written (`<<-'EOF'`).
    word: String,
    name: String,
    /// The body, each line ending in `\n`, leading tabs kept.
    body: String,
    chomp: bool,
    quoted: bool,
}

impl Heredoc {
    /// The body as BuildKit reads it: with `<<-`, leading tabs removed from each line.
    fn text(&self) -> String {
        if !self.chomp {
            return self.body.clone();
        }
        self.body
            .split_inclusive('\n')
            .map(|l| l.trim_start_matches('\t'))
            .collect()
    }
}

/// Lower `text`; every use of BuildKit syntax yolo does not lower, if any.
pub(crate) fn lower(text: &str) -> Result<Lowered, Vec<NotLowered>> {
    let mut out = Lowered::default();
    let mut refused = Vec::new();
    let (directives, _, instructions) = parse(text, &mut out, &mut refused);
    out.text.push_str(&directives);
    let mut state = Stage::default();
    if out.changed {
        out.uses.push(1);
    }
    for ins in &instructions {
        let before = std::mem::take(&mut out.changed);
        lower_instruction(ins, &mut state, &mut out, &mut refused);
        if out.changed {
            out.uses.push(ins.line);
        }
        out.changed |= before;
    }
    if refused.is_empty() {
        Ok(out)
    } else {
        Err(refused)
    }
}

/// The stage's last `USER` (steps yolo adds that need root switch to it and back).
#[derive(Default)]
struct Stage {
    user: Option<String>,
    counter: usize,
}

/// The parser directives to keep (`escape`), the escape character and the instructions.
fn parse(
    text: &str,
    out: &mut Lowered,
    refused: &mut Vec<NotLowered>,
) -> (String, char, Vec<Instruction>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut escape = '\\';
    let mut kept = String::new();
    let mut i = 0;
    // Parser directives: `# key=value` lines at the very top.
    while i < lines.len() {
        let Some(directive) = lines[i].trim().strip_prefix('#') else {
            break;
        };
        let Some((key, value)) = directive.split_once('=') else {
            break;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim();
        if key.contains(char::is_whitespace) {
            break;
        }
        match key.as_str() {
            "escape" => {
                escape = value.chars().next().unwrap_or('\\');
                let _ = writeln!(kept, "# escape={value}");
            }
            "syntax" => {
                out.changed = true;
                if is_dockerfile_frontend(value) {
                    out.notes.push(format!(
                        "line {}: `# syntax={value}` ignored: yolo builds with the classic builder behind its firewall, lowering the BuildKit syntax it finds",
                        i + 1
                    ));
                } else {
                    refused.push(NotLowered {
                        line: i + 1,
                        what: format!("`# syntax={value}` (a custom BuildKit front end)"),
                    });
                }
            }
            // `check` (lint settings) and others: meaningless to the classic builder.
            _ => {}
        }
        i += 1;
    }
    let mut instructions = Vec::new();
    let mut current: Option<Instruction> = None;
    while i < lines.len() {
        let raw = lines[i];
        let trimmed = raw.trim();
        i += 1;
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_none()) {
            continue;
        }
        let (body, continues) = match trimmed.strip_suffix(escape) {
            Some(body) => (body, true),
            None => (trimmed, false),
        };
        let entry = current.get_or_insert_with(|| Instruction {
            line: i,
            text: String::new(),
            heredocs: Vec::new(),
        });
        if !entry.text.is_empty() {
            entry.text.push(' ');
        }
        entry.text.push_str(body);
        if continues {
            continue;
        }
        let Some(mut ins) = current.take() else {
            continue;
        };
        let keyword = crate::dockerfile::first_word(&ins.text).to_ascii_uppercase();
        if matches!(keyword.as_str(), "RUN" | "COPY" | "ADD") {
            for (word, name, chomp, quoted) in heredoc_words(&ins.text) {
                let mut body = String::new();
                let mut closed = false;
                while i < lines.len() {
                    let line = lines[i];
                    i += 1;
                    let end = if chomp {
                        line.trim_start_matches('\t')
                    } else {
                        line
                    };
                    if end == name {
                        closed = true;
                        break;
                    }
                    body.push_str(line);
                    body.push('\n');
                }
                if !closed {
                    refused.push(NotLowered {
                        line: ins.line,
                        what: format!("a heredoc `{word}` with no line `{name}` ending it"),
                    });
                }
                ins.heredocs.push(Heredoc {
                    word,
                    name,
                    body,
                    chomp,
                    quoted,
                });
            }
        }
        instructions.push(ins);
    }
    instructions.extend(current);
    (kept, escape, instructions)
}

/// `docker/dockerfile` (any tag or digest, on Docker Hub): the front end whose syntax yolo
/// lowers.
fn is_dockerfile_frontend(value: &str) -> bool {
    let name = value.split(['@', ':']).next().unwrap_or_default();
    let name = name
        .strip_prefix("docker.io/")
        .or_else(|| name.strip_prefix("index.docker.io/"))
        .unwrap_or(name);
    matches!(
        name,
        "docker/dockerfile" | "docker/dockerfile-upstream" | "dockerfile"
    ) || value.starts_with("docker/dockerfile:")
}

/// The shell words of an instruction's arguments, quotes kept, split on unquoted blanks.
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => {
                quote = None;
                word.push(c);
            }
            Some(_) => word.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                word.push(c);
            }
            None if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            None => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The heredocs an instruction opens, in order: the word, the name, `<<-`, quoted.
fn heredoc_words(text: &str) -> Vec<(String, String, bool, bool)> {
    let args = &text[crate::dockerfile::first_word(text).len()..];
    if args.trim_start().starts_with('[') {
        return Vec::new();
    }
    let mut found = Vec::new();
    for word in words(args) {
        let rest = word.trim_start_matches(|c: char| c.is_ascii_digit());
        let Some(rest) = rest.strip_prefix("<<") else {
            continue;
        };
        let (chomp, rest) = match rest.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, rest),
        };
        if rest.is_empty() || rest.contains('<') {
            continue;
        }
        let quoted = rest.contains(['\'', '"']);
        let name: String = rest.chars().filter(|c| *c != '\'' && *c != '"').collect();
        if name.is_empty() {
            continue;
        }
        found.push((word.clone(), name, chomp, quoted));
    }
    found
}

/// A `--name=value` flag, or `--name` alone.
fn flag(word: &str) -> (String, Option<String>) {
    let body = word.trim_start_matches('-');
    match body.split_once('=') {
        Some((k, v)) => (k.to_ascii_lowercase(), Some(unquote(v).to_string())),
        None => (body.to_ascii_lowercase(), None),
    }
}

fn unquote(v: &str) -> &str {
    let v = v.trim();
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return inner;
        }
    }
    v
}

/// The instruction's flags (leading `--` words) and the rest.
fn split_flags(args: &str) -> (Vec<String>, &str) {
    let mut flags = Vec::new();
    let mut rest = args.trim_start();
    loop {
        let word = crate::dockerfile::first_word(rest);
        if !word.starts_with("--") {
            break;
        }
        flags.push(word.to_string());
        rest = rest[word.len()..].trim_start();
    }
    (flags, rest)
}

fn lower_instruction(
    ins: &Instruction,
    stage: &mut Stage,
    out: &mut Lowered,
    refused: &mut Vec<NotLowered>,
) {
    let keyword = crate::dockerfile::first_word(&ins.text);
    let upper = keyword.to_ascii_uppercase();
    let args = ins.text[keyword.len()..].trim_start();
    let emit = |out: &mut Lowered, line: String| {
        out.text.push_str(&line);
        out.text.push('\n');
    };
    match upper.as_str() {
        "FROM" => {
            stage.user = None;
            emit(out, ins.text.clone());
        }
        "USER" => {
            stage.user = Some(args.trim().to_string());
            emit(out, ins.text.clone());
        }
        "RUN" => {
            let lines = lower_run(ins, args, stage, out, refused);
            for line in lines {
                emit(out, line);
            }
        }
        "COPY" | "ADD" => {
            let lines = lower_copy(ins, &upper, args, stage, out, refused);
            for line in lines {
                emit(out, line);
            }
        }
        _ => emit(out, ins.text.clone()),
    }
}

/// A RUN step: its mounts and flags, its heredocs.
fn lower_run(
    ins: &Instruction,
    args: &str,
    stage: &mut Stage,
    out: &mut Lowered,
    refused: &mut Vec<NotLowered>,
) -> Vec<String> {
    let (flags, command) = split_flags(args);
    let mut before = Vec::new();
    for word in &flags {
        out.changed = true;
        let (name, value) = flag(word);
        let value = value.unwrap_or_default();
        match name.as_str() {
            "mount" => lower_mount(ins.line, &value, &mut before, out, refused),
            "network" => {
                if value != "default" {
                    out.notes.push(format!(
                        "line {}: `RUN --network={value}` ignored: the step runs behind yolo's build firewall like every other",
                        ins.line
                    ));
                }
            }
            "security" => out.notes.push(format!(
                "line {}: `RUN --security={value}` ignored: the step runs with the builder's usual confinement",
                ins.line
            )),
            _ => refused.push(NotLowered {
                line: ins.line,
                what: format!("`RUN {word}`"),
            }),
        }
    }
    let run = if ins.heredocs.is_empty() {
        format!("RUN {command}")
    } else {
        out.changed = true;
        run_heredoc(command, &ins.heredocs, stage)
    };
    before.push(run);
    before
}

/// `RUN` with heredocs, as BuildKit runs it: one heredoc that is the whole command is a script
/// for the shell (or, starting with `#!`, an executable file); otherwise the command and its
/// heredocs, written out, go to the shell, which reads the heredocs itself.
fn run_heredoc(command: &str, heredocs: &[Heredoc], stage: &mut Stage) -> String {
    if let [only] = heredocs {
        if command.trim() == only.word {
            let script = only.text();
            if script.starts_with("#!") {
                stage.counter += 1;
                let file = format!("/tmp/.yolo-heredoc-{}", stage.counter);
                return format!(
                    "RUN printf '%b' {} > {file} && chmod 755 {file} && {file}; yolo_status=$?; rm -f {file}; exit $yolo_status",
                    printf_arg(&script)
                );
            }
            return format!("RUN eval \"$(printf '%b' {})\"", printf_arg(&script));
        }
    }
    let mut full = command.to_string();
    for heredoc in heredocs {
        full.push('\n');
        full.push_str(&heredoc.body);
        full.push_str(&heredoc.name);
    }
    // `$(…)` drops a last newline anyway: the shells end a heredoc at the end of the text.
    format!("RUN eval \"$(printf '%b' {})\"", printf_arg(&full))
}

/// `text` as one single-quoted shell word for `printf '%b'`: backslashes doubled, newlines and
/// other control characters as octal escapes, quotes closed and reopened. One line, so the
/// classic builder reads it as one instruction.
fn printf_arg(text: &str) -> String {
    let mut s = String::from("'");
    for c in text.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '\'' => s.push_str("'\\''"),
            '\n' => s.push_str("\\n"),
            '\t' => s.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(s, "\\0{:03o}", u32::from(c) & 0o377);
            }
            c => s.push(c),
        }
    }
    s.push('\'');
    s
}

/// One `--mount=…` of a RUN step.
fn lower_mount(
    line: usize,
    value: &str,
    before: &mut Vec<String>,
    out: &mut Lowered,
    refused: &mut Vec<NotLowered>,
) {
    let mut options = std::collections::BTreeMap::new();
    for part in value.split(',') {
        let (k, v) = part.split_once('=').unwrap_or((part, "true"));
        options.insert(k.trim().to_ascii_lowercase(), unquote(v).to_string());
    }
    let kind = options.get("type").map_or("bind", String::as_str);
    let target = options
        .get("target")
        .or_else(|| options.get("dst"))
        .or_else(|| options.get("destination"))
        .cloned();
    match kind {
        "cache" | "tmpfs" => out.notes.push(format!(
            "line {line}: `RUN --mount=type={kind}` dropped: the step runs without it (the classic builder has no {kind} mounts)"
        )),
        "secret" | "ssh" => {
            let required = options
                .get("required")
                .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
            if required {
                refused.push(NotLowered {
                    line,
                    what: format!("`RUN --mount=type={kind},required=true` (yolo passes no {kind} to builds)"),
                });
            } else {
                out.notes.push(format!(
                    "line {line}: `RUN --mount=type={kind}` dropped: yolo passes no {kind} to builds, so the step runs without it, as BuildKit runs it when none is given"
                ));
            }
        }
        "bind" => {
            let Some(target) = target else {
                refused.push(NotLowered {
                    line,
                    what: "`RUN --mount=type=bind` with no target".into(),
                });
                return;
            };
            let source = options
                .get("source")
                .or_else(|| options.get("src"))
                .map_or(".", String::as_str);
            let from = options
                .get("from")
                .map(|f| format!("--from={f} "))
                .unwrap_or_default();
            before.push(format!(
                "COPY {from}{} {}",
                json_word(source),
                json_word(&target)
            ));
            out.notes.push(format!(
                "line {line}: `RUN --mount=type=bind` of {source} lowered to a COPY to {target} before the step (the files stay in that layer)"
            ));
        }
        other => refused.push(NotLowered {
            line,
            what: format!("`RUN --mount=type={other}`"),
        }),
    }
}

/// A path for a COPY, quoted when it has blanks (the JSON form is the classic builder's way).
fn json_word(path: &str) -> String {
    if path.contains(char::is_whitespace) {
        serde_json::to_string(path).unwrap_or_default()
    } else {
        path.to_string()
    }
}

/// `COPY`/`ADD`: `--link` dropped, `--chmod` through the tar, heredoc sources as context files,
/// `ADD --checksum` a download behind the firewall.
fn lower_copy(
    ins: &Instruction,
    keyword: &str,
    args: &str,
    stage: &mut Stage,
    out: &mut Lowered,
    refused: &mut Vec<NotLowered>,
) -> Vec<String> {
    let (flags, rest) = split_flags(args);
    let mut kept = Vec::new();
    let mut chmod = None;
    let mut checksum = None;
    let mut from = false;
    let mut chown = None;
    for word in &flags {
        let (name, value) = flag(word);
        match name.as_str() {
            "chown" | "platform" => {
                if name == "chown" {
                    chown = value.clone();
                }
                kept.push(word.clone());
            }
            "from" if keyword == "COPY" => {
                from = true;
                kept.push(word.clone());
            }
            "link" => out.changed = true,
            "chmod" => {
                out.changed = true;
                match value
                    .as_deref()
                    .and_then(|v| u32::from_str_radix(v, 8).ok())
                {
                    Some(mode) if mode <= 0o7777 => chmod = Some(mode),
                    _ => refused.push(NotLowered {
                        line: ins.line,
                        what: format!("`{keyword} {word}` (yolo lowers octal modes only)"),
                    }),
                }
            }
            "checksum" if keyword == "ADD" => {
                out.changed = true;
                checksum = value;
            }
            _ => {
                out.changed = true;
                refused.push(NotLowered {
                    line: ins.line,
                    what: format!("`{keyword} {word}`"),
                });
            }
        }
    }
    if rest.starts_with('[') {
        let Ok(mut paths) = serde_json::from_str::<Vec<String>>(rest) else {
            return vec![ins.text.clone()];
        };
        let Some(dest) = paths.pop() else {
            return vec![ins.text.clone()];
        };
        return copy_paths(
            ins, keyword, &kept, chmod, checksum, from, chown, paths, &dest, stage, out, refused,
        );
    }
    let mut paths: Vec<String> = words(rest).into_iter().map(|w| w.to_string()).collect();
    let Some(dest) = paths.pop() else {
        return vec![ins.text.clone()];
    };
    copy_paths(
        ins, keyword, &kept, chmod, checksum, from, chown, paths, &dest, stage, out, refused,
    )
}

#[allow(clippy::too_many_arguments)]
fn copy_paths(
    ins: &Instruction,
    keyword: &str,
    kept: &[String],
    chmod: Option<u32>,
    checksum: Option<String>,
    from: bool,
    chown: Option<String>,
    paths: Vec<String>,
    dest: &str,
    stage: &mut Stage,
    out: &mut Lowered,
    refused: &mut Vec<NotLowered>,
) -> Vec<String> {
    if let Some(digest) = checksum {
        return add_checksum(ins, &digest, chmod, chown, &paths, dest, stage, refused);
    }
    let mut sources = Vec::new();
    for path in paths {
        if let Some(heredoc) = ins.heredocs.iter().find(|h| h.word == path) {
            out.changed = true;
            if !heredoc.quoted && heredoc.text().contains('$') {
                refused.push(NotLowered {
                    line: ins.line,
                    what: format!(
                        "`{keyword} {}` whose text uses build variables (`$`), which yolo does not expand; with a quoted delimiter (<<'{}') the text is copied as written",
                        heredoc.word, heredoc.name
                    ),
                });
                continue;
            }
            stage.counter += 1;
            let name = format!("{FILES_DIR}/{}/{}", out.files.len() + 1, heredoc.name);
            out.files.push(ContextFile {
                name: name.clone(),
                content: Content::Data(heredoc.text().into_bytes()),
                mode: Some(chmod.unwrap_or(0o644)),
            });
            sources.push(name);
            continue;
        }
        match chmod {
            Some(_) if from => {
                refused.push(NotLowered {
                    line: ins.line,
                    what: format!("`{keyword} --chmod` with `--from`"),
                });
            }
            Some(mode) => {
                let Some(rel) = context_path(&path) else {
                    refused.push(NotLowered {
                        line: ins.line,
                        what: format!(
                            "`{keyword} --chmod` of {path} (yolo lowers it for plain paths of the build context, no wildcards or URLs)"
                        ),
                    });
                    continue;
                };
                let base = rel.rsplit('/').next().unwrap_or_default().to_string();
                let name = format!("{FILES_DIR}/{}/{base}", out.files.len() + 1);
                out.files.push(ContextFile {
                    name: name.clone(),
                    content: Content::Context(rel),
                    mode: Some(mode),
                });
                sources.push(name);
            }
            None => sources.push(path),
        }
    }
    let mut line = keyword.to_string();
    for flag in kept {
        line.push(' ');
        line.push_str(flag);
    }
    let all: Vec<&str> = sources.iter().map(String::as_str).chain([dest]).collect();
    line.push(' ');
    line.push_str(&serde_json::to_string(&all).unwrap_or_default());
    vec![line]
}

/// A source path inside the context (`/`-separated, no `..` leading out), unless it is a URL or
/// has wildcards.
fn context_path(path: &str) -> Option<String> {
    if path.contains("://") || path.contains(['*', '?', '[', '$']) || path.starts_with("git@") {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return None;
    }
    Some(parts.join("/"))
}

/// `ADD --checksum=<algo>:<hex> <url> <dest>`: downloaded in a RUN step, behind the firewall,
/// with the image's curl or wget, its digest checked, then moved into place with ADD's mode
/// (0600) or `--chmod`, and `--chown`.
#[allow(clippy::too_many_arguments)]
fn add_checksum(
    ins: &Instruction,
    digest: &str,
    chmod: Option<u32>,
    chown: Option<String>,
    paths: &[String],
    dest: &str,
    stage: &Stage,
    refused: &mut Vec<NotLowered>,
) -> Vec<String> {
    let tool = match digest.split_once(':') {
        Some(("sha256", hex)) if hex.len() == 64 => Some(("sha256sum", hex)),
        Some(("sha384", hex)) if hex.len() == 96 => Some(("sha384sum", hex)),
        Some(("sha512", hex)) if hex.len() == 128 => Some(("sha512sum", hex)),
        _ => None,
    }
    .filter(|(_, hex)| hex.bytes().all(|b| b.is_ascii_hexdigit()));
    let url = match paths {
        [url] if url.starts_with("http://") || url.starts_with("https://") => Some(url),
        _ => None,
    };
    let (Some((sum, hex)), Some(url)) = (tool, url) else {
        refused.push(NotLowered {
            line: ins.line,
            what: format!(
                "`ADD --checksum={digest}` of {} (yolo lowers one http(s) URL with a sha256, sha384 or sha512 digest)",
                paths.join(" ")
            ),
        });
        return Vec::new();
    };
    let target = if dest.ends_with('/') {
        let path = url.split(['?', '#']).next().unwrap_or_default();
        let base = path
            .rsplit('/')
            .next()
            .filter(|b| !b.is_empty() && !b.contains(':'));
        format!("{dest}{}", base.unwrap_or("download"))
    } else {
        dest.to_string()
    };
    let mode = chmod.unwrap_or(0o600);
    let mut script = format!(
        "set -e; yolo_file=$(mktemp); \
         if command -v curl >/dev/null 2>&1; then curl -fsSL -o \"$yolo_file\" {url}; \
         elif command -v wget >/dev/null 2>&1; then wget -q -O \"$yolo_file\" {url}; \
         else echo 'yolo: ADD --checksum is lowered to a download behind the build firewall, which needs curl or wget in the image' >&2; exit 1; fi; \
         echo \"{hex}  $yolo_file\" | {sum} -c - >/dev/null || {{ echo 'yolo: ADD --checksum: the download of '{url}' does not match {digest}' >&2; rm -f \"$yolo_file\"; exit 1; }}; \
         mkdir -p \"$(dirname {target})\"; mv \"$yolo_file\" {target}; chmod {mode:o} {target}",
        url = dquote(url),
        target = dquote(&target),
    );
    if let Some(owner) = &chown {
        let _ = write!(script, "; chown {} {}", dquote(owner), dquote(&target));
    }
    // The download writes where ADD would, as root: a stage that switched to another user
    // switches back for this step.
    let user = stage
        .user
        .as_deref()
        .filter(|u| !matches!(*u, "root" | "0" | "0:0" | "root:root"));
    match user {
        Some(user) => vec![
            "USER root".into(),
            format!("RUN {script}"),
            format!("USER {user}"),
        ],
        None => vec![format!("RUN {script}")],
    }
}

/// A double-quoted shell word that still expands `$VAR` (build arguments, as ADD does).
fn dquote(text: &str) -> String {
    let mut s = String::from("\"");
    for c in text.chars() {
        if matches!(c, '"' | '\\' | '`') {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('"');
    s
}

/// The message of a Dockerfile yolo cannot lower: each use with its line, and what to do.
pub(crate) fn refusal_message(shown: &str, found: &[NotLowered]) -> String {
    let mut message = String::from(
        "the Dockerfile uses BuildKit features that yolo cannot run behind its build firewall (yolo builds with Docker's classic builder, whose RUN steps it can put behind the guard, and lowers the common BuildKit syntax to it):",
    );
    for f in found {
        let _ = write!(
            message,
            "\n  {shown}:{}: {}",
            f.line,
            crate::visible::escape_controls(&f.what)
        );
    }
    message.push_str(
        "\nto use it anyway, build the image yourself with BuildKit (`docker buildx build -t NAME ...`) and name it in devcontainer.json (\"image\": \"NAME\"); yolo then starts it behind the firewall",
    );
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lowered(text: &str) -> Lowered {
        lower(text).unwrap_or_else(|e| panic!("refused: {e:?}"))
    }

    #[test]
    fn a_classic_dockerfile_is_left_alone() {
        let l = lowered("FROM x\nRUN echo hi \\\n  there\nCOPY --chown=1:1 a /b\n");
        assert!(!l.changed);
        assert!(l.files.is_empty() && l.notes.is_empty());
    }

    #[test]
    fn the_dockerfile_syntax_line_is_dropped_with_a_note_and_a_custom_frontend_refused() {
        let l = lowered("# syntax=docker/dockerfile:1.7\n# escape=\\\nFROM x\n");
        assert!(l.changed);
        assert_eq!(l.text, "# escape=\\\nFROM x\n");
        assert!(l.notes[0].contains("line 1"), "{:?}", l.notes);
        let e = lower("# syntax=example.com/my/frontend:2\nFROM x\n").unwrap_err();
        assert_eq!(e[0].line, 1);
        assert!(e[0].what.contains("custom BuildKit front end"));
    }

    #[test]
    fn a_run_heredoc_script_becomes_one_line_the_shell_evals() {
        let l =
            lowered("FROM x\nRUN <<EOF\nset -e\necho 'it''s' \\ 100% \"$HOME\"\nEOF\nRUN true\n");
        assert_eq!(
            l.text,
            "FROM x\nRUN eval \"$(printf '%b' 'set -e\\necho '\\''it'\\'''\\''s'\\'' \\\\ 100% \"$HOME\"\\n')\"\nRUN true\n"
        );
    }

    #[test]
    fn heredocs_with_a_command_tabs_stripped_shebang_scripts_and_several() {
        let l = lowered("FROM x\nRUN <<-EOF bash\n\techo a\n\tEOF\n");
        assert!(
            l.text.contains("'<<-EOF bash\\n\\techo a\\nEOF'"),
            "{}",
            l.text
        );
        let l = lowered("FROM x\nRUN <<EOF\n#!/usr/bin/env python3\nprint(1)\nEOF\n");
        assert!(
            l.text.contains("> /tmp/.yolo-heredoc-1 && chmod 755"),
            "{}",
            l.text
        );
        let l = lowered("FROM x\nRUN cat <<A > /a && cat <<'B' > /b\none\nA\ntwo $X\nB\nCMD x\n");
        assert!(
            l.text
                .contains("'cat <<A > /a && cat <<'\\''B'\\'' > /b\\none\\nA\\ntwo $X\\nB'"),
            "{}",
            l.text
        );
        assert!(l.text.ends_with("CMD x\n"));
    }

    #[test]
    fn an_unclosed_heredoc_is_named() {
        let e = lower("FROM x\nRUN <<EOF\necho\n").unwrap_err();
        assert_eq!(e[0].line, 2);
    }

    #[test]
    fn copy_heredocs_become_context_files() {
        let l = lowered(
            "FROM x\nCOPY --chmod=755 <<'EOF' <<NOTE /usr/local/bin/\necho $1\nEOF\nplain\nNOTE\n",
        );
        assert_eq!(
            l.text,
            "FROM x\nCOPY [\".yolo-lowered/1/EOF\",\".yolo-lowered/2/NOTE\",\"/usr/local/bin/\"]\n"
        );
        assert_eq!(l.files[0].content, Content::Data(b"echo $1\n".to_vec()));
        assert_eq!(l.files[1].mode, Some(0o755));
        let e = lower("FROM x\nCOPY <<EOF /a\n$HOME\nEOF\n").unwrap_err();
        assert!(e[0].what.contains("build variables"), "{e:?}");
    }

    #[test]
    fn mounts_are_dropped_copied_or_refused() {
        let l = lowered(
            "FROM x\nRUN --mount=type=cache,target=/root/.cache --mount=type=bind,source=req.txt,target=/tmp/req.txt --mount=type=secret,id=t pip install -r /tmp/req.txt\n",
        );
        assert_eq!(
            l.text,
            "FROM x\nCOPY req.txt /tmp/req.txt\nRUN pip install -r /tmp/req.txt\n"
        );
        assert_eq!(l.notes.len(), 3, "{:?}", l.notes);
        let l =
            lowered("FROM x\nRUN --mount=from=build,source=/out,target=/in --network=none make\n");
        assert_eq!(l.text, "FROM x\nCOPY --from=build /out /in\nRUN make\n");
        let e = lower("FROM x\nRUN --mount=type=ssh,required=true git clone x\nRUN --device=x y\n")
            .unwrap_err();
        assert_eq!(e.iter().map(|n| n.line).collect::<Vec<_>>(), [2, 3]);
    }

    #[test]
    fn copy_link_is_plain_and_chmod_goes_through_the_tar() {
        let l = lowered(
            "FROM x\nCOPY --link --chown=1:1 a b/ /dst/\nCOPY --chmod=0750 ./bin/../tool /t\n",
        );
        assert_eq!(
            l.text,
            "FROM x\nCOPY --chown=1:1 [\"a\",\"b/\",\"/dst/\"]\nCOPY [\".yolo-lowered/1/tool\",\"/t\"]\n"
        );
        assert_eq!(l.files[0].content, Content::Context("tool".into()));
        assert_eq!(l.files[0].mode, Some(0o750));
        for bad in [
            "COPY --chmod=u+x a /b",
            "COPY --chmod=755 *.sh /b/",
            "COPY --chmod=755 ../../etc/passwd /b",
            "COPY --from=s --chmod=755 a /b",
            "COPY --parents a /b",
        ] {
            assert!(lower(&format!("FROM x\n{bad}\n")).is_err(), "{bad}");
        }
    }

    #[test]
    fn add_checksum_downloads_in_a_run_step_as_root() {
        let sum = "a".repeat(64);
        let l = lowered(&format!(
            "FROM x\nUSER dev\nADD --checksum=sha256:{sum} --chown=dev https://e.example/f.tgz?x=1 /opt/\n"
        ));
        let lines: Vec<&str> = l.text.lines().collect();
        assert_eq!(lines[2], "USER root");
        assert!(lines[3].contains(&format!("echo \"{sum}  $yolo_file\" | sha256sum -c -")));
        assert!(lines[3]
            .contains("mv \"$yolo_file\" \"/opt/f.tgz\"; chmod 600 \"/opt/f.tgz\"; chown \"dev\""));
        assert_eq!(lines[4], "USER dev");
        assert!(lower("FROM x\nADD --checksum=sha256:00 https://e/x /x\n").is_err());
        assert!(lower(&format!("FROM x\nADD --checksum=sha256:{sum} ./local /x\n")).is_err());
    }
}
