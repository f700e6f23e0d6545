//! Built-in allowlist presets, one file per ecosystem in `firewall/`, embedded at build time.
