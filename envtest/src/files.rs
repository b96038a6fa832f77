//! Files of a run directory.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, Result};

/// Writes `bytes` to `path`, readable by this user only (keys, kubeconfigs pointing at keys).
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .map_err(|source| Error::io(format!("writing {}", path.display()), source))
}

/// Creates `path` and its parents.
pub fn create_dir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path)
        .map_err(|source| Error::io(format!("creating {}", path.display()), source))
}
