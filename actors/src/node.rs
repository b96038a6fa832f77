//! placeholder
#[derive(Debug)]
pub enum OpResult {}
