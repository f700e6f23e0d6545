//! One workspace's session: what yolo keeps for it in the user's data dir (`state`), the
//! session's audit record (`record`) and what the user approved (`approval`).

pub(crate) mod approval;
pub(crate) mod record;
pub(crate) mod state;
