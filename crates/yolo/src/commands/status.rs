//! `yolo status` (`ps`): yolo's containers.

use crate::engine::labels;
use crate::error::Result;
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct Row {
    pub name: String,
    pub workspace: String,
    pub state: String,
    pub image: String,
    pub cpus: Option<f64>,
    pub memory_bytes: Option<i64>,
    pub pids: Option<i64>,
    /// Docker's own words, e.g. "Up 3 minutes".
    pub status: String,
    /// firewall, open or none.
    pub network: String,
    /// The firewall guard's state (running, exited, missing); empty with `--network none`.
    pub guard: String,
}

pub async fn execute(json: bool) -> Result<i32> {
    let engine = super::engine().await?;
    let mut rows = Vec::new();
    let all = engine.list_managed().await?;
    let role = |c: &bollard::models::ContainerSummary| {
        c.labels
            .as_ref()
            .and_then(|l| l.get(labels::ROLE))
            .cloned()
            .unwrap_or_default()
    };
    for c in all.iter().filter(|c| role(c) == "agent").cloned() {
        let labels = c.labels.clone().unwrap_or_default();
        let network = labels.get(labels::NETWORK).cloned().unwrap_or_default();
        let guard = all
            .iter()
            .find(|g| {
                role(g) == "guard"
                    && g.labels.as_ref().and_then(|l| l.get(labels::ID)) == labels.get(labels::ID)
            })
            .and_then(|g| g.state.as_ref().map(|s| s.to_string()))
            .unwrap_or_else(|| {
                if network == "none" {
                    String::new()
                } else {
                    "missing".into()
                }
            });
        let id = c.id.clone().unwrap_or_default();
        let host = engine.inspect(&id).await.ok().and_then(|i| i.host_config);
        rows.push(Row {
            name: c
                .names
                .unwrap_or_default()
                .first()
                .cloned()
                .unwrap_or_default()
                .trim_start_matches('/')
                .to_string(),
            workspace: labels
                .get(labels::LOCAL_FOLDER)
                .cloned()
                .unwrap_or_default(),
            state: c.state.map(|s| s.to_string()).unwrap_or_default(),
            image: c.image.unwrap_or_default(),
            cpus: host
                .as_ref()
                .and_then(|h| h.nano_cpus)
                .map(|n| n as f64 / 1e9),
            memory_bytes: host.as_ref().and_then(|h| h.memory),
            pids: host.as_ref().and_then(|h| h.pids_limit),
            status: c.status.unwrap_or_default(),
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
