//! One kind of violation the soak's checks count: how often, and the first few.

/// Kept per kind of violation, to show what happened.
const EXAMPLES: usize = 5;

/// One kind of violation: how often, and the first few.
#[derive(Debug, Clone, Default)]
pub struct Violations {
    /// How many.
    pub count: u64,
    /// The first few, described.
    pub examples: Vec<String>,
}

impl Violations {
    pub(super) fn add(&mut self, what: String) {
        self.count += 1;
        if self.examples.len() < EXAMPLES {
            self.examples.push(what);
        }
    }
}
