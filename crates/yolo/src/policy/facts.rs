//! What the policy knows of the host's disk: read by its callers before it runs
//! (`crate::policy_facts`), handed in as values, so that every check here stays a function of
//! its input. A test builds these facts directly.

use crate::paths::normalize_path;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The facts of one evaluation.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Facts {
    /// The nearest ancestor of the workspace (itself included) that holds `.git`: the
    /// repository's root, which needs no grant either.
    pub(crate) git_root: Option<PathBuf>,
    /// Where host paths really lead through links (`paths::real_path`), by their folded path:
    /// those a Compose project names. A path not here counts as leading outside the
    /// repository (a grant is asked for rather than a link missed).
    pub(crate) real_paths: BTreeMap<PathBuf, PathBuf>,
    /// The folders whose protected paths were looked at (`protect`): the workspace mount's
    /// source, and the workspace below it. Protecting below another folder is refused, as a
    /// look that was not made.
    pub(crate) looked: BTreeSet<PathBuf>,
    /// What exists below those folders of what `protect` looks at, links not followed; what is
    /// not here does not exist.
    pub(crate) kinds: BTreeMap<PathBuf, Kind>,
    /// The submodules' git folders below each `modules` folder looked at (`.git/modules`, and
    /// theirs in turn), in order.
    pub(crate) submodules: BTreeMap<PathBuf, Vec<PathBuf>>,
    /// The `.git` file of each submodule's working tree, by its git folder (from its
    /// `core.worktree`).
    pub(crate) pointers: BTreeMap<PathBuf, PathBuf>,
}

/// What a path is, links not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Link,
}

impl Facts {
    /// What `path` is, `None` when it does not exist.
    pub(crate) fn kind(&self, path: &Path) -> Option<Kind> {
        self.kinds.get(path).copied()
    }

    /// Where `path` really leads, when that was looked at.
    pub(crate) fn real_path(&self, path: &Path) -> Option<&Path> {
        let folded = normalize_path(path).unwrap_or_else(|| path.to_path_buf());
        self.real_paths.get(&folded).map(PathBuf::as_path)
    }

    /// The submodules' git folders below `modules`.
    pub(crate) fn submodules(&self, modules: &Path) -> &[PathBuf] {
        self.submodules
            .get(modules)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}
