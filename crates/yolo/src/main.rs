fn main() {
    std::process::exit(yolo::run());
}
