//! Why a drain is stuck, in words a person can act on.
//!
//! A pod whose PDB allows no disruption gets a [`Blocker`]: waiting for a replacement to
//! become ready (named), the replacement cannot be scheduled (and why: when every node it would
//! fit is cordoned by other maintenances, a cross-node deadlock naming them), the PDB can
//! never allow a disruption (structural), or several PDBs select the pod. `placement` holds
//! the pure parts (which pod the PDB waits for, whether it would fit a cordoned node),
//! `investigate` the few bounded reads that find the replacement; the eviction actor runs it
//! once per blocked PDB, not once per pod, and the node actors render the result.

mod blocker;
mod investigate;
mod placement;

pub use blocker::{Blocker, Cordoned};
pub use investigate::{Investigation, investigate};
pub use placement::{fits_if_uncordoned, waited_for};
