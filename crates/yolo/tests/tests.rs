//! Integration tests: the real `yolo` binary against a real Docker Engine. One test binary (fast
//! to link); modules by area in tests/cases/.

mod cases;
mod support;
