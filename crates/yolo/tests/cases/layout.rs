//! The layers of DESIGN.md, checked on the workspace itself: three crates, each with only the
//! dependencies of its layer, and no target pinned for the whole build.

use std::path::PathBuf;
use std::process::Command;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `cargo metadata` of the members alone (their declared dependencies; nothing to download).
fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(workspace().join("Cargo.toml"))
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("metadata json")
}

/// The normal (not dev, not build) dependencies of a workspace crate, by name.
fn dependencies(meta: &serde_json::Value, name: &str) -> Vec<String> {
    let package = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{name} is a workspace member"));
    package["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"].is_null())
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn three_crates_each_with_the_dependencies_of_its_layer() {
    let meta = metadata();
    let members: Vec<String> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect();
    assert_eq!(members.len(), 3, "{members:?}");
    for name in ["yolo-protocol", "yolo-guard", "yolo"] {
        assert!(
            members
                .iter()
                .any(|m| m.contains(&format!("#{name}@")) || m.contains(&format!("/{name}#"))),
            "{name} in {members:?}"
        );
    }

    let protocol = dependencies(&meta, "yolo-protocol");
    for dep in &protocol {
        assert!(
            ["serde", "serde_json", "chrono", "zeroize", "sha2", "hex"].contains(&dep.as_str()),
            "yolo-protocol does no I/O and pulls no runtime: {dep}"
        );
    }
    let guard = dependencies(&meta, "yolo-guard");
    let cli = dependencies(&meta, "yolo");
    for engine_side in ["bollard", "clap", "dialoguer", "indicatif", "console"] {
        assert!(
            !guard.iter().any(|d| d == engine_side),
            "guard depends on {engine_side}"
        );
        assert!(cli.iter().any(|d| d == engine_side) || engine_side == "console");
    }
    for kernel_side in [
        "hickory-proto",
        "nftables",
        "netlink-sys",
        "netlink-packet-core",
        "netlink-packet-netfilter",
        "notify",
    ] {
        assert!(
            guard.iter().any(|d| d == kernel_side),
            "guard uses {kernel_side}"
        );
        assert!(
            !cli.iter().any(|d| d == kernel_side),
            "the CLI depends on {kernel_side}"
        );
    }
    assert!(
        !cli.iter().any(|d| d == "yolo-guard"),
        "the CLI embeds the guard, not links it"
    );
}

#[test]
fn no_target_is_pinned_for_the_whole_build() {
    let config = workspace().join(".cargo/config.toml");
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    let parsed: toml::Value = toml::from_str(&text).expect("valid .cargo/config.toml");
    assert!(
        parsed.get("build").and_then(|b| b.get("target")).is_none(),
        "{}: [build] target",
        config.display()
    );
    assert!(!text.contains("crt-static"), "{}", config.display());
}
