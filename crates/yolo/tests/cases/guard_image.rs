//! The guard runs `yolo-guard`, baked into its image once per yolo version and binary digest:
//! not the CLI copied into each new guard container.

use crate::support::*;

fn guard_of(t: &Test) -> String {
    let label = format!("label={LABEL}={}", t.id);
    let ids = docker(&[
        "ps",
        "-aq",
        "--filter",
        &label,
        "--filter",
        "label=dev.yolo.role=guard",
    ]);
    let ids: Vec<&str> = ids.lines().collect();
    assert_eq!(ids.len(), 1, "one guard: {ids:?}");
    ids[0].to_string()
}

/// Run the guard program of `image` in an image that holds nothing else (`FROM scratch`: no C
/// library, no loader) and return its stdout. The copy, the image and the container carry the
/// test's label.
fn run_alone(t: &Test, image: &str, args: &[&str]) -> String {
    let label = format!("{LABEL}={}", t.id);
    let context = tempfile::tempdir().unwrap();
    // The image has no default command (it is built on scratch): name one.
    let copy = docker(&[
        "create",
        "--label",
        &label,
        image,
        "/usr/local/bin/yolo-guard",
    ]);
    let copy = copy.trim();
    assert!(!copy.is_empty(), "docker create {image}");
    let binary = context.path().join("yolo-guard");
    docker(&[
        "cp",
        &format!("{copy}:/usr/local/bin/yolo-guard"),
        binary.to_str().unwrap(),
    ]);
    docker(&["rm", copy]);
    assert!(binary.exists(), "copied the guard program out of {image}");
    std::fs::write(
        context.path().join("Dockerfile"),
        "FROM scratch\nCOPY yolo-guard /yolo-guard\n",
    )
    .unwrap();
    let alone = format!("yolo-test-guard-alone:{}", t.id);
    docker(&[
        "build",
        "-q",
        "--label",
        &label,
        "-t",
        &alone,
        context.path().to_str().unwrap(),
    ]);
    let mut run = vec!["run", "--rm", "--label", &label, "--network", "none"];
    run.push(&alone);
    run.push("/yolo-guard");
    run.extend_from_slice(args);
    docker(&run)
}

#[test]
fn the_guard_program_is_baked_into_a_versioned_image_once() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    let guard = guard_of(&t);
    let info = inspect(&guard);
    let image = info["Config"]["Image"].as_str().unwrap().to_string();
    let prefix = format!("yolo-guard:{}-", env!("CARGO_PKG_VERSION"));
    let digest = image
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{image}"));
    assert!(
        digest.len() == 12 && digest.chars().all(|c| c.is_ascii_hexdigit()),
        "the tag carries the binary's digest: {image}"
    );
    assert_eq!(
        info["Config"]["Cmd"][0], "/usr/local/bin/yolo-guard",
        "{}",
        info["Config"]["Cmd"]
    );

    // The program is part of the image, not a file added to this container.
    let diff = docker(&["diff", &guard]);
    assert!(!diff.contains("yolo-guard"), "docker diff: {diff}");
    let version = docker(&["exec", &guard, "/usr/local/bin/yolo-guard", "--version"]);
    assert_eq!(
        version.trim(),
        format!("yolo-guard {}", env!("CARGO_PKG_VERSION"))
    );
    // A static executable: it runs with no C library at all.
    assert_eq!(
        run_alone(&t, &image, &["--version"]).trim(),
        format!("yolo-guard {}", env!("CARGO_PKG_VERSION"))
    );
    // Nothing but the guard: no shell, no nft, no package manager (no RUN step built it).
    for program in ["/bin/sh", "/usr/sbin/nft"] {
        let out = try_docker(&["exec", &guard, program, "-c", "echo ran"]).unwrap();
        assert!(!out.contains("ran"), "{program} exists in the guard image");
    }
    let image_id = inspect(&image)["Id"].clone();

    // A recreated guard uses the same image: nothing is rebuilt or copied.
    t.yolo(&["up", "--rebuild"]).ok();
    let again = guard_of(&t);
    assert_ne!(again, guard, "--rebuild made a new guard container");
    let info = inspect(&again);
    assert_eq!(info["Config"]["Image"], image.as_str());
    assert_eq!(inspect(&image)["Id"], image_id);
    assert!(!docker(&["diff", &again]).contains("yolo-guard"));
}

#[test]
fn doctor_says_where_the_guard_comes_from() {
    let t = Test::new();
    t.yolo(&["doctor"])
        .ok()
        .assert_stdout_contains("✓ firewall guard for linux/")
        .assert_stdout_contains("built into this yolo, image yolo-guard:");
    t.user_config("guard_image = \"registry.example/yolo-guard:mine\"\n");
    t.yolo(&["doctor"]).ok().assert_stdout_contains(
        "the image named by guard_image in your config, image registry.example/yolo-guard:mine",
    );
}
