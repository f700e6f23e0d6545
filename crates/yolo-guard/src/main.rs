//! `yolo-guard`: the program in the guard container. Two verbs, parsed by hand so this binary
//! carries no CLI framework: `run --config FILE` (the guard itself, PID 1's child) and
//! `ctl '<json>'` (one control request, run by the host through `docker exec`).

const USAGE: &str =
    "usage: yolo-guard run --config FILE | yolo-guard ctl '<request json>' | yolo-guard --version";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
