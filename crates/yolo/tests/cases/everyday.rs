//! Everyday configs that used to break `up`: more CPUs than the engine has, busy ports,
//! typos, runArgs the corpus uses, a subfolder, a Docker context.

use crate::support::*;

#[test]
fn more_cpus_than_the_engine_has_are_capped_with_a_warning() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "hostRequirements": {"cpus": 64}}"#);
    let (run, out) = t.up(&[]);
    run.assert_stderr_contains("the repository asks for 64 CPUs");
    let c = inspect(out["container"]["id"].as_str().unwrap());
    let cores: i64 = docker(&["info", "--format", "{{.NCPU}}"])
        .trim()
        .parse()
        .unwrap();
    let nano = c["HostConfig"]["NanoCpus"].as_i64().unwrap();
    assert!(
        nano > 0 && nano < cores * 1_000_000_000,
        "{nano} for {cores} cores"
    );
}
