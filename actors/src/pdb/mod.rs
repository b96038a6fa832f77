//! PodDisruptionBudgets as the actors see them: the domain types the `Cluster` port's PDB
//! watch delivers (`types`), label selector matching (`selector`) and what a PDB's spec and
//! status say on their own (`verdict`: how many disruptions it allows now, whether it can ever
//! allow one). Pure; the eviction actor gates on these and the diagnosis explains them.

mod pod;
mod selector;
mod types;
mod verdict;

pub use pod::{PdbPod, Toleration};
pub use selector::{LabelSelector, SelectorOperator, SelectorRequirement};
pub use types::{IntOrPercent, Pdb, PdbChange, PdbStatus};
pub use verdict::{Structural, structural};
