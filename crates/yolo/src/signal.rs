//! The signals yolo ends for (Ctrl-C, SIGTERM, SIGHUP), by number: a value the error type and
//! `interrupt` share, kept apart from both so neither imports the other for it.

/// A signal yolo ended for, by number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Signal(pub(crate) i32);

impl Signal {
    pub(crate) const INT: Signal = Signal(2);
    pub(crate) const TERM: Signal = Signal(15);
    pub(crate) const HUP: Signal = Signal(1);

    pub(crate) fn name(self) -> &'static str {
        match self.0 {
            1 => "SIGHUP",
            2 => "SIGINT",
            15 => "SIGTERM",
            _ => "a signal",
        }
    }

    /// The shell's convention: 128 + the signal's number (130 for Ctrl-C).
    pub(crate) fn exit_code(self) -> i32 {
        128 + self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(Signal::INT.exit_code(), 130);
        assert_eq!(Signal::TERM.exit_code(), 143);
        assert_eq!(Signal::HUP.exit_code(), 129);
        assert_eq!(Signal::TERM.name(), "SIGTERM");
    }
}
