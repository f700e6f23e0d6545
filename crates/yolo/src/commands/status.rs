//! `yolo status`: yolo's containers and the leftovers of failed or interrupted `up`s
//! (`session::status`), as a table or `--json`; `yolo down --remove` in the workspace removes
//! the leftovers.

use crate::error::Result;
use crate::output::{self, Leftover};
use std::collections::BTreeSet;

pub(crate) async fn execute(json: bool) -> Result<i32> {
    let engine = super::engine().await?;
    let rows = crate::session::status::rows(&engine, json).await?;
    if json {
        output::print(&rows);
        return Ok(0);
    }
    if rows.is_empty() {
        eprintln!("no yolo containers (start one with `yolo up` in a repository)");
    } else {
        print_table(&rows);
    }
    // What is left in Docker that is no session's: said, so `down --remove` of every session
    // is not taken for "nothing of yolo's left".
    let spares = engine.spares_anywhere().await?;
    if spares > 0 {
        eprintln!(
            "{spares} spare network namespace{} ready for the next guards (no session's: `yolo prepare --remove` removes them)",
            if spares == 1 { "" } else { "s" }
        );
    }
    Ok(0)
}

/// The table of `yolo status`. Names, workspaces and Compose services come from the repository
/// (its folder, its config's `name`, its Compose file): each escaped where it goes.
fn print_table(rows: &[output::Status]) {
    use crate::visible::escape_controls as shown;
    let agents: Vec<_> = rows.iter().filter(|r| r.container.is_some()).collect();
    if !agents.is_empty() {
        println!(
            "{:<32} {:<9} {:<18} {:<22} {:<20} WORKSPACE",
            "CONTAINER", "STATE", "NETWORK", "LIMITS", "UPTIME"
        );
    }
    for r in agents {
        let (Some(c), Some(limits), Some(network)) = (&r.container, &r.limits, &r.network) else {
            continue;
        };
        let limits = format!(
            "{}cpu {} {}pids",
            limits.cpus.map(|c| format!("{c}")).unwrap_or("-".into()),
            limits.memory_bytes.map(human_bytes).unwrap_or("-".into()),
            limits.pids.map(|p| p.to_string()).unwrap_or("-".into())
        );
        let guard = network.guard.as_deref().unwrap_or("");
        let mode = match guard {
            "" | "running" => network.mode.clone(),
            guard => format!("{} (guard {guard})", network.mode),
        };
        println!(
            "{:<32} {:<9} {:<18} {:<22} {:<20} {}",
            shown(&c.name),
            c.state,
            mode,
            limits,
            r.status.as_deref().unwrap_or_default(),
            shown(&c.workspace)
        );
        for p in &r.ports {
            println!("  forwarded {} -> {}:{}", p.container, p.address, p.host);
        }
        if !r.services.is_empty() {
            let list: Vec<String> = r
                .services
                .iter()
                .map(|s| format!("{} {}", shown(&s.name), shown(&s.state)))
                .collect();
            println!("  compose services: {}", list.join(", "));
        }
        let gaps = [crate::audit::file_watch_gap, crate::audit::log_cap_reached];
        for gap in gaps
            .iter()
            .filter_map(|gap| r.session.as_deref().and_then(gap))
        {
            eprintln!("  warning: {}: {gap}", c.name);
        }
        if c.state == "running" && !guard.is_empty() && guard != "running" {
            eprintln!(
                "  warning: {}'s firewall guard is {guard}: the container is offline (fail closed); `yolo up` restores it",
                c.name
            );
        }
    }
    // Two agents of one workspace carry the same list.
    let mut seen = BTreeSet::new();
    let leftovers: Vec<&Leftover> = rows
        .iter()
        .flat_map(|r| &r.leftovers)
        .filter(|l| seen.insert(l.id.as_str()))
        .collect();
    if leftovers.is_empty() {
        return;
    }
    println!(
        "\n{:<32} {:<8} {:<9} {:<48} WORKSPACE",
        "LEFTOVER", "KIND", "STATE", "PROBLEM"
    );
    for l in leftovers {
        println!(
            "{:<32} {:<8} {:<9} {:<48} {}",
            shown(&l.name),
            l.kind,
            l.state.as_deref().unwrap_or("-"),
            l.problem,
            shown(l.workspace.as_deref().unwrap_or("-"))
        );
    }
    eprintln!(
        "{} leftovers of a failed or interrupted `yolo up`: `yolo down --remove` in their workspace removes them",
        console::style("yolo:").bold()
    );
}

fn human_bytes(b: i64) -> String {
    const GIB: i64 = 1 << 30;
    const MIB: i64 = 1 << 20;
    if b % GIB == 0 {
        format!("{}GiB", b / GIB)
    } else {
        format!("{}MiB", b / MIB)
    }
}
