//! `yolo init`: write a `.devcontainer/` for an agent (`templates::Init`).

use crate::cli::Target;
use crate::error::{Error, Result};
use crate::templates::Init;

pub(crate) fn execute(target: &Target, agent: &str, force: bool) -> Result<i32> {
    let init = Init::new(target.workspace.as_deref(), target.config.as_deref(), agent)?;
    if !force {
        if let Some(path) = init.existing() {
            return Err(Error::Exists(path.to_path_buf()));
        }
    }
    eprintln!("{}", init.detected());
    init.write(|path| eprintln!("wrote {}", path.display()))?;
    eprintln!("next: `yolo run {agent}`");
    Ok(0)
}
