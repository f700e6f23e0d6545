//! `yolo status` (`ps`): yolo's containers.

use crate::engine::Role;
use crate::error::Result;
use crate::firewall::mode_name;
use serde::Serialize;

#[derive(Debug, Serialize)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) workspace: String,
    pub(crate) state: String,
    pub(crate) image: String,
    pub(crate) cpus: Option<f64>,
    pub(crate) memory_bytes: Option<i64>,
    pub(crate) pids: Option<i64>,
    /// Docker's own words, e.g. "Up 3 minutes".
    pub(crate) status: String,
    /// firewall, open or none.
    pub(crate) network: String,
    /// The firewall guard's state (running, exited, missing); empty with `--network none`.
    pub(crate) guard: String,
}

pub(crate) async fn execute(json: bool) -> Result<i32> {
    let engine = super::engine().await?;
    let mut rows = Vec::new();
    let all = engine.list_managed().await?;
    for c in all.iter().filter(|c| c.role == Role::Agent) {
        let network = c.network.map(mode_name).unwrap_or_default().to_string();
        let guard = all
            .iter()
            .find(|g| g.role == Role::Guard && g.devcontainer_id == c.devcontainer_id)
            .map(|g| g.state.clone())
            .unwrap_or_else(|| {
                if network == "none" {
                    String::new()
                } else {
                    "missing".into()
                }
            });
        let limits = engine.inspect(&c.id).await.ok();
        rows.push(Row {
            name: c.name.clone(),
            workspace: c.workspace.clone().unwrap_or_default(),
            state: c.state.clone(),
            image: c.image.clone(),
            cpus: limits.as_ref().and_then(|l| l.cpus),
            memory_bytes: limits.as_ref().and_then(|l| l.memory_bytes),
            pids: limits.as_ref().and_then(|l| l.pids),
            status: c.status.clone(),
            network,
            guard,
        });
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
        return Ok(0);
    }
    if rows.is_empty() {
        eprintln!("no yolo containers (start one with `yolo up` in a repository)");
        return Ok(0);
    }
    println!(
        "{:<32} {:<9} {:<18} {:<22} {:<20} WORKSPACE",
        "CONTAINER", "STATE", "NETWORK", "LIMITS", "UPTIME"
    );
    for r in rows {
        let limits = format!(
            "{}cpu {} {}pids",
            r.cpus.map(|c| format!("{c}")).unwrap_or("-".into()),
            r.memory_bytes.map(human_bytes).unwrap_or("-".into()),
            r.pids.map(|p| p.to_string()).unwrap_or("-".into())
        );
        let network = match r.guard.as_str() {
            "" | "running" => r.network.clone(),
            guard => format!("{} (guard {guard})", r.network),
        };
        println!(
            "{:<32} {:<9} {:<18} {:<22} {:<20} {}",
            r.name, r.state, network, limits, r.status, r.workspace
        );
        if r.state == "running" && !r.guard.is_empty() && r.guard != "running" {
            eprintln!(
                "  warning: {}'s firewall guard is {}: the container is offline (fail closed); `yolo up` restores it",
                r.name, r.guard
            );
        }
    }
    Ok(0)
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
