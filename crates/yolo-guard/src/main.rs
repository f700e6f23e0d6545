//! `yolo-guard`: the program in the guard container, and the shim in the agent's. Three verbs,
//! parsed by hand so this binary carries no CLI framework: `run --config FILE` (the guard
//! itself, PID 1 of the namespace), `ctl '<json>'` (one control request, run by the host
//! through `docker exec`) and `shim PROGRAM [ARGS...]` (the exec audit's shim, see
//! `exec::shim`).

const USAGE: &str = "usage: yolo-guard run --config FILE | yolo-guard ctl '<request json>' | \
                     yolo-guard shim PROGRAM [ARGS...] | yolo-guard --version";

fn main() {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if raw.first().is_some_and(|verb| verb == "shim") {
        std::process::exit(yolo_guard::exec::shim::main(&raw[1..]));
    }
    let args: Vec<String> = raw
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let code = match args.as_slice() {
        ["run", "--config", path] => match yolo_guard::run(std::path::Path::new(path)) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("yolo-guard: {e}");
                1
            }
        },
        ["ctl", request] => yolo_guard::control::ctl_main(request),
        ["--version"] => {
            println!("yolo-guard {}", env!("CARGO_PKG_VERSION"));
            0
        }
        _ => {
            eprintln!("{USAGE}");
            64
        }
    };
    std::process::exit(code);
}
