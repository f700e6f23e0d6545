//! `${devcontainerId}` exactly as the spec / reference CLI computes it.

/// sha256 of the JSON of the id labels `{"devcontainer.config_file":..,"devcontainer.local_folder":..}`
/// (keys sorted), as a base-32 number padded to 52 digits.
pub fn devcontainer_id(local_folder: &str, config_file: &str) -> String {
    let _ = (local_folder, config_file);
    todo!("helper: id")
}
