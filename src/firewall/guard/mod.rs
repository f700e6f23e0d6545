//! `yolo guard`: runs inside the guard container, which owns the network namespace.
