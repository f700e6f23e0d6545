//! `yolo doctor`: is Docker usable, and what to do when it is not.

use crate::error::Result;

pub async fn execute() -> Result<i32> {
    let mut problems = 0;
    match crate::engine::Engine::connect().await {
        Err(e) => {
            problems += 1;
            println!("✗ Docker Engine: {e}");
        }
        Ok(engine) => {
            match engine.docker.version().await {
                Ok(v) => {
                    let api = v.api_version.clone().unwrap_or_default();
                    println!(
                        "✓ Docker Engine {} (API {api}, {} {})",
                        v.version.unwrap_or_default(),
                        v.os.unwrap_or_default(),
                        v.arch.unwrap_or_default()
                    );
                    if !api_at_least(&api, 1, 41) {
                        problems += 1;
                        println!(
                            "✗ API {api} is older than 1.41: upgrade Docker to 20.10 or newer"
                        );
                    }
                    match engine.docker.info().await {
                        Ok(info) => {
                            let runtimes: Vec<String> =
                                info.runtimes.unwrap_or_default().into_keys().collect();
                            println!(
                                "✓ runtimes: {} (default {})",
                                runtimes.join(", "),
                                info.default_runtime.unwrap_or_default()
                            );
                            println!(
                                "✓ cgroup driver {} (v{})",
                                info.cgroup_driver
                                    .map(|d| d.to_string())
                                    .unwrap_or_default(),
                                info.cgroup_version
                                    .map(|d| d.to_string())
                                    .unwrap_or_default()
                            );
                            if info.pids_limit == Some(false) {
                                problems += 1;
                                println!("✗ the kernel has no pids cgroup: process limits will not apply");
                            }
                            if info.memory_limit == Some(false) {
                                problems += 1;
                                println!("✗ the kernel has no memory cgroup: memory limits will not apply");
                            }
                        }
                        Err(e) => {
                            problems += 1;
                            println!("✗ docker info: {}", crate::engine::message(&e));
                        }
                    }
                }
                Err(e) => {
                    problems += 1;
                    println!("✗ docker version: {}", crate::engine::message(&e));
                }
            }
        }
    }
    println!(
        "  user config: {}",
        crate::user_config::UserConfig::path().display()
    );
    println!(
        "  data dir:    {}",
        crate::user_config::data_dir().display()
    );
    Ok(if problems == 0 { 0 } else { 1 })
}

fn api_at_least(api: &str, major: u32, minor: u32) -> bool {
    let mut parts = api.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}
