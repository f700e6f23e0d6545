//! `yolo ps` and `yolo logs`: the agent runs on record (`session::runs`) and a detached
//! run's output.

use crate::error::{Error, Result};
use crate::session::runs::{self, RunState};
use std::path::Path;

/// `yolo ps`: the running agent runs of every workspace (with `all`, the ended ones too).
pub(crate) async fn ps(all_runs: bool, json: bool) -> Result<i32> {
    let runs = runs::listed(all_runs).await?;
    if json {
        let items: Vec<serde_json::Value> = runs
            .iter()
            .map(|(r, state)| runs::json_view(r, state))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&items).map_err(|e| Error::Failed {
                what: crate::error::Failure::Serialize,
                cause: crate::error::Cause::bare(e),
            })?
        );
        return Ok(0);
    }
    if runs.is_empty() {
        eprintln!(
            "yolo: no {}agent run{}",
            if all_runs { "" } else { "running " },
            if all_runs {
                ""
            } else {
                " (`yolo ps --all` lists ended ones)"
            }
        );
        return Ok(0);
    }
    let rows: Vec<[String; 7]> = runs
        .iter()
        .map(|(r, state): &(_, RunState)| runs::table_row(r, state))
        .collect();
    crate::output::print_table(runs::TABLE_HEADER, &rows);
    Ok(0)
}

/// `yolo logs [RUN] [-f] [--raw]`: a detached run's output; with `follow`, until the run
/// ends. The agent wrote it: control characters are shown escaped (an ESC sequence could
/// rewrite the terminal, its title or the clipboard), line by line, unless `raw`.
pub(crate) async fn logs(
    id: Option<&str>,
    of: Option<(&Path, Option<&str>)>,
    follow: bool,
    raw: bool,
) -> Result<i32> {
    use std::io::Write;
    let run = runs::find(id, of)?;
    let mut out = std::io::stdout().lock();
    let show = |bytes: &[u8]| {
        let shown = if raw {
            bytes.to_vec()
        } else {
            crate::visible::escape_output(&String::from_utf8_lossy(bytes)).into_bytes()
        };
        out.write_all(&shown)
            .and_then(|_| out.flush())
            .map_err(|e| Error::io(Path::new("<stdout>"), e))
    };
    runs::read_log(&run, follow, show).await?;
    Ok(0)
}
