//! The eviction actor's counters (what [`EvictionStats`] reports), changed only here.

use super::messages::EvictionStats;

/// The counters of what happened; the sizes of the actor's tables are added when reported.
#[derive(Debug, Default)]
pub(super) struct Tally(EvictionStats);

impl Tally {
    /// An eviction call went out.
    pub(super) fn called(&mut self) {
        self.0.calls += 1;
    }

    /// A budget refused a call.
    pub(super) fn blocked(&mut self) {
        self.0.blocked += 1;
    }

    /// The API server throttled a call.
    pub(super) fn throttled(&mut self) {
        self.0.throttled += 1;
    }

    /// A request was refused: the queue was full.
    pub(super) fn refused(&mut self) {
        self.0.refused += 1;
    }

    /// A request waits on its budget's status instead of being sent.
    pub(super) fn waited_on_pdb(&mut self) {
        self.0.pdb_waits += 1;
    }

    /// A diagnosis made `reads` reads.
    pub(super) fn diagnosis_read(&mut self, reads: u32) {
        self.0.diagnosis_reads += u64::from(reads);
    }

    /// Something refused an intercepted request.
    pub(super) fn intercepted(&mut self) {
        self.0.intercepted += 1;
    }

    /// The counters so far.
    pub(super) fn counted(&self) -> EvictionStats {
        self.0
    }
}
