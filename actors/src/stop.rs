//! Why an actor stopped on purpose. ractor carries a stop reason as text; the supervisor reads
//! it back to tell a node actor that finished from one that must be restarted.

use std::fmt;

/// The reason an actor was stopped with (its text is what ractor carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A node actor undid its maintenance and released the finalizer.
    Undone,
    /// A node actor's NodeMaintenance no longer exists.
    Gone,
    /// A node actor replaced by an older NodeMaintenance for the same node.
    Superseded,
    /// The actor system is shutting down.
    Shutdown,
}

impl StopReason {
    const ALL: [StopReason; 4] = [
        StopReason::Undone,
        StopReason::Gone,
        StopReason::Superseded,
        StopReason::Shutdown,
    ];

    /// The text ractor carries.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Undone => "undone",
            StopReason::Gone => "gone",
            StopReason::Superseded => "superseded",
            StopReason::Shutdown => "shutdown",
        }
    }

    /// The reason a stopped actor reported, if it is one of these (a crash or a kill is not).
    pub fn parse(reason: Option<&str>) -> Option<StopReason> {
        let reason = reason?;
        StopReason::ALL.into_iter().find(|r| r.as_str() == reason)
    }

    /// The form `ActorRef::stop` takes.
    pub fn text(self) -> Option<String> {
        Some(self.as_str().to_string())
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_reads_back_and_anything_else_is_none() {
        for reason in StopReason::ALL {
            assert_eq!(StopReason::parse(reason.text().as_deref()), Some(reason));
        }
        assert_eq!(StopReason::parse(Some("crashed: boom")), None);
        assert_eq!(StopReason::parse(None), None);
        assert_eq!(StopReason::Undone.to_string(), "undone");
    }
}
