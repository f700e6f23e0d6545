//! `yolo doctor`: is Docker usable, and what to do when it is not.

use crate::engine::guard_image::{self, Carried, GuardSource, Platform};
use crate::engine::{Engine, Report};
use crate::error::Result;
use crate::settings::GuardSettings;
use crate::user_config::UserConfig;

pub(crate) async fn execute() -> Result<i32> {
    let report = match Engine::connect().await {
        Ok(engine) => engine.report().await,
        Err(e) => Err(e),
    };
    let problems = match report {
        Ok(report) => print_report(&report) + print_guard(&report),
        Err(e) => {
            println!("✗ Docker Engine: {e}");
            1
        }
    };
    print_extra_ca(&crate::ca::HostSigns::of_this_host());
    println!(
        "  user config: {}",
        crate::user_config::UserConfig::path().display()
    );
    println!("  data dir:    {}", crate::store::root().display());
    Ok(if problems == 0 { 0 } else { 1 })
}

/// The user's extra CA certificates, or the signs that the host needs some (a proxy that
/// intercepts TLS) and how to hand them to yolo. Advice, never a failed check.
fn print_extra_ca(signs: &crate::ca::HostSigns) {
    let configured = UserConfig::load()
        .ok()
        .map(|user| user.extra_ca)
        .unwrap_or_default();
    if !configured.is_empty() {
        let shown: Vec<String> = configured.iter().map(|p| p.display().to_string()).collect();
        println!(
            "✓ extra CA certificates: {} (extra_ca in your config)",
            shown.join(", ")
        );
        return;
    }
    if let Some(advice) = signs.advice() {
        println!("! {advice}");
    }
}

/// Where the firewall guard's program will come from for this engine (one problem if nowhere).
fn print_guard(r: &Report) -> usize {
    let engine = Platform {
        os: r.os.clone(),
        arch: r.arch.clone(),
    };
    let configured = match UserConfig::load().and_then(|user| GuardSettings::resolve(&user)) {
        Ok(guard) => guard.image,
        Err(e) => {
            println!("✗ user config: {e}");
            return 1;
        }
    };
    match guard_image::select(configured.as_deref(), &Carried::this_build(), &engine) {
        Ok(source) => {
            let how = match &source {
                GuardSource::Configured(_) => "the image named by guard_image in your config",
                GuardSource::Embedded => "built into this yolo",
                GuardSource::FromSource => {
                    "built by the engine from source at the first `yolo up` (needs Docker Hub and crates.io once)"
                }
            };
            println!(
                "✓ firewall guard for {engine}: {how}, image {}",
                guard_image::tag(&source)
            );
            0
        }
        Err(e) => {
            println!("✗ firewall guard: {e}");
            1
        }
    }
}

/// Print what the engine reported; the number of problems found.
fn print_report(r: &Report) -> usize {
    let mut problems = 0;
    let api = &r.api_version;
    println!(
        "✓ Docker Engine {} (API {api}, {} {})",
        r.version, r.os, r.arch
    );
    if !r.api_at_least(1, 41) {
        problems += 1;
        println!("✗ API {api} is older than 1.41: upgrade Docker to 20.10 or newer");
    }
    println!(
        "✓ runtimes: {} (default {})",
        r.runtimes.join(", "),
        r.default_runtime
    );
    // Advice, not a problem: most engines have no GPU, and a config asking for one starts
    // without it (declined) unless `--grant gpu`.
    match r.gpu_runtime() {
        Some(runtime) => println!(
            "✓ GPU runtime {runtime}: `--grant gpu` gives a container the GPUs its config asks for"
        ),
        None => println!(
            "  no GPU runtime (nvidia) in the engine: a config's GPU request is declined, and `--grant gpu` would make the engine refuse to start the container"
        ),
    }
    println!(
        "✓ cgroup driver {} (v{})",
        r.cgroup_driver, r.cgroup_version
    );
    if r.pids_limit == Some(false) {
        problems += 1;
        println!("✗ the kernel has no pids cgroup: process limits will not apply");
    }
    if r.memory_limit == Some(false) {
        problems += 1;
        println!("✗ the kernel has no memory cgroup: memory limits will not apply");
    }
    match r.kernel_at_least(5, 19) {
        Some(true) => println!(
            "✓ kernel {}: the exec audit can record every program the agent runs",
            r.kernel
        ),
        Some(false) => {
            problems += 1;
            println!(
                "✗ kernel {} is older than 5.19: the exec audit's shim cannot install its filter \
                 and refuses to start anything; set `[audit] exec = false` in yolo's config",
                r.kernel
            );
        }
        None => println!(
            "? kernel {:?}: cannot tell whether the exec audit works",
            r.kernel
        ),
    }
    let (cpus, _) = crate::policy::fit_cpus(
        crate::run_spec::Limits::default().cpus,
        crate::run_spec::Chooser::Default,
        r.host.cpus,
    );
    println!(
        "✓ {} cores: a container gets {cpus} unless you set more (one is left for the host)",
        r.host.cpus
    );
    if r.host.can_limit_disk() {
        println!(
            "✓ storage {}: the container's writable layer is limited ([limits] disk)",
            r.host.storage()
        );
    } else {
        println!(
            "! storage {}: Docker cannot limit a container's writable layer here; disk use is not limited (docs/security-model.md)",
            r.host.storage()
        );
    }
    problems
}
