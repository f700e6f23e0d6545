//! Taking a session's containers down (`yolo down`): stop them, the agent before its guard,
//! or remove everything yolo made for the workspace, found by its labels whatever yolo's state
//! says (a failed or killed `up`'s leftovers too).

use crate::engine::{Engine, Found, Made, Role};
use crate::error::{Error, Result};
use crate::project::Located;

/// Stop the agent, then its guard (it must never run on without its guard), then the other
/// services of a Compose project, unless its `shutdownAction` is `none` (read from the agent's
/// label: `down` does not read the config).
pub(crate) async fn stop(engine: &Engine, located: &Located) -> Result<()> {
    let owner = located.owner();
    let Found { agent, guard } = engine.find(&owner).await?;
    if agent.is_none() && guard.is_none() {
        eprintln!("yolo: no container for {}", located.workspace.display());
    }
    for c in [&agent, &guard].into_iter().flatten() {
        engine.stop(&c.id).await?;
    }
    // The spare network namespace its guard joined, if it did (`engine::spares`).
    if let Some(g) = &guard {
        engine
            .stop_holder(&crate::engine::spares::holder_name(&g.name))
            .await?;
    }
    if let Some(a) = &agent {
        eprintln!("yolo: {} stopped", a.name);
    }
    let keep = match &agent {
        Some(a) => engine
            .container_label(&a.id, crate::engine::labels::COMPOSE_SHUTDOWN)
            .await?
            .is_some_and(|v| v == "none"),
        None => false,
    };
    let services: Vec<_> = engine
        .made_for(&owner)
        .await?
        .containers
        .into_iter()
        .filter(|c| c.role == Role::Service && c.running)
        .collect();
    if keep && !services.is_empty() {
        eprintln!("yolo: the other Compose services keep running (shutdownAction \"none\")");
        return Ok(());
    }
    for c in &services {
        engine.stop(&c.id).await?;
        eprintln!("yolo: {} stopped", c.name);
    }
    Ok(())
}

/// Remove every container yolo made for the workspace (agents first), yolo's own network(s)
/// for it (never a network the user named in their config), and with `volumes` the named
/// volumes of its agent containers and those labelled for it. Goes on past a failure and
/// returns the first.
pub(crate) async fn remove_all(engine: &Engine, located: &Located, volumes: bool) -> Result<()> {
    let Made {
        containers,
        networks,
        volumes: labelled,
    } = engine.made_for(&located.owner()).await?;
    use crate::devcontainer::names;
    let container = names::container_name(&located.workspace, &located.devcontainer_id);
    let own = names::own_network(&container);
    let own_project = names::compose_project(&container);
    let networks: Vec<_> = networks
        .into_iter()
        .filter(|n| {
            n.name == own
                // A Compose project's, named after the project (`names::compose_project`).
                || n.name.starts_with(&format!("{own_project}_"))
                || containers
                    .iter()
                    .any(|c| n.name == format!("{}-net", c.name))
        })
        .collect();
    if containers.is_empty() && networks.is_empty() {
        eprintln!("yolo: no container for {}", located.workspace.display());
    }
    let (mut removed, failed) = engine
        .remove_in_order(
            containers.iter().collect(),
            &networks.iter().collect::<Vec<_>>(),
        )
        .await;
    let mut first_error: Option<Error> = failed.into_iter().next();
    let mut keep = |result: Result<()>| -> bool {
        match result {
            Ok(()) => true,
            Err(e) => {
                first_error.get_or_insert(e);
                false
            }
        }
    };
    // A helper a killed yolo left mounting the copy's volume (it would keep it in use).
    match engine.remove_helpers(&located.owner()).await {
        Ok(helpers) => removed.extend(helpers),
        Err(e) => {
            keep(Err(e));
        }
    }
    if volumes {
        let mut names: Vec<&String> = containers
            .iter()
            .filter(|c| c.role == Role::Agent)
            .flat_map(|c| &c.volumes)
            .chain(&labelled)
            .collect();
        names.sort();
        names.dedup();
        for name in names {
            if keep(engine.remove_volume(name).await) {
                removed.push(format!("volume {name}"));
            }
        }
    }
    // The network namespaces the guards joined (`engine::spares`), once their guard is gone:
    // each found by its guard's name, also when the guard itself went before.
    let guards = containers
        .iter()
        .filter(|c| c.role == Role::Guard)
        .map(|c| c.name.clone())
        .chain(std::iter::once(format!("{container}-guard")));
    let mut holders: Vec<String> = guards
        .map(|g| crate::engine::spares::holder_name(&g))
        .collect();
    holders.sort();
    holders.dedup();
    for holder in holders {
        match engine.remove_holder(&holder).await {
            Ok(true) => removed.push(holder),
            Ok(false) => {}
            Err(e) => {
                keep(Err(e));
            }
        }
    }
    // The host folders of the guards' configs (`engine::guard_config_dir`), once their guard
    // is gone.
    let data = crate::store::root();
    for guard in containers.iter().filter(|c| c.role == Role::Guard) {
        let dir = crate::engine::guard_config_dir_of(&data, &guard.name);
        if dir.is_dir() && removed.iter().any(|r| r.contains(&guard.name)) {
            keep(std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e)));
        }
    }
    // The last session on the engine gone: the spares made for the next ones go too, so
    // nothing of yolo's is left in Docker (a top-up under way is let finish first).
    match remove_spares_if_last(engine).await {
        Ok(0) => {}
        Ok(n) => removed.push(format!(
            "{n} spare network namespace{}",
            if n == 1 { "" } else { "s" }
        )),
        Err(e) => {
            keep(Err(e));
        }
    }
    if !removed.is_empty() {
        eprintln!("yolo: removed {}", removed.join(", "));
    }
    first_error.map_or(Ok(()), Err)
}

/// With no session's container left on the engine, the unclaimed spares removed, once no
/// top-up is making more; how many.
async fn remove_spares_if_last(engine: &Engine) -> Result<usize> {
    if engine.sessions_left().await? {
        return Ok(0);
    }
    let _making = crate::lock::acquire_spare_making().await?;
    if engine.sessions_left().await? {
        return Ok(0);
    }
    engine.remove_spares().await
}
