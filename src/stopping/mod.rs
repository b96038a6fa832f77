//! What a leading replica does when it is told to stop (SIGTERM) rather than losing its
//! leadership: it lets the undos under way finish first ([`let_undos_finish`]), so that an
//! uninstall, which deletes every NodeMaintenance and stops nmo in the same second, still gets
//! every node back; and once its actors have stopped, it shortens the node leases it leaves
//! behind ([`shorten_node_leases`]), so that with no successor they block Node Health Check
//! for minutes, not an hour.

mod node_leases;
mod undos;

pub use node_leases::{ShortenError, shorten_node_leases};
pub use undos::let_undos_finish;
