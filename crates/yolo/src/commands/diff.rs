//! `yolo diff [NAME]`: what `yolo sync` would bring from a session's copy (a named session's, or
//! the workspace's on a remote engine), against the commit where the agent's history meets your
//! `HEAD`, without moving any branch (`remote::preview`). The files your machine runs that it
//! changes (`[workspace] watch`: hooks, `.envrc`, `.vscode/`, Makefiles, nested `.git`) come
//! first, flagged; then `git diff --stat`, then the patch. Everything in it is the agent's
//! writing: shown with control characters escaped.

use crate::error::{Error, Result};
use crate::remote_copy::{preview, Taking};
use crate::session::{Hold, Session};

pub(crate) async fn execute(target: &crate::cli::Target, stat: bool) -> Result<i32> {
    let located = super::locate(target)?;
    super::known(&located)?;
    let taking = Taking::from_config()?;
    let engine = super::engine().await?;
    let session = Session::at(located, Hold::Read).await?;
    let located = &session.located;
    if located.copy_reason()?.is_none() {
        return Err(Error::Usage(format!(
            "the workspace session of {} works on the repository itself: `git diff` shows its changes; `yolo diff NAME` is for a session on a copy (`--copy NAME`)",
            located.workspace.display()
        )));
    }
    let Some(preview) = preview(&engine, located, &taking).await? else {
        return Err(Error::NotRunning(format!(
            "nothing to compare for {}: yolo has no copy of it in a volume (`yolo up --copy NAME` makes one)",
            located.workspace.display()
        )));
    };
    let repo = &located.workspace;
    let names = crate::remote::diff_of(repo, &preview.base, &preview.tree, &["--name-only", "-z"])?;
    let watched: Vec<String> = names
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .filter(|n| crate::watched::is_watched(&taking.watch, n))
        .collect();
    let shown = |bytes: &[u8]| crate::visible::escape_output(&String::from_utf8_lossy(bytes));
    if !watched.is_empty() {
        println!(
            "{} files your machine runs (read them before you merge):",
            console::style("warning:").yellow().bold()
        );
        for name in &watched {
            println!("  {}", crate::visible::escape_controls(name));
        }
        println!();
    }
    for s in &preview.skipped {
        println!(
            "left out (larger than [workspace] sync_max_file): {}",
            crate::visible::escape_controls(&s.path)
        );
    }
    let summary = crate::remote::diff_of(repo, &preview.base, &preview.tree, &["--stat"])?;
    if summary.is_empty() {
        println!(
            "no change from {}",
            &preview.base[..preview.base.len().min(12)]
        );
        return Ok(0);
    }
    print!("{}", shown(&summary));
    if !stat {
        println!();
        let patch = crate::remote::diff_of(repo, &preview.base, &preview.tree, &[])?;
        print!("{}", shown(&patch));
    }
    Ok(0)
}
