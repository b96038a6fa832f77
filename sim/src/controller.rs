//! Plumbing shared by the in-process controllers: batches of store events, resync on lag,
//! shutdown.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use crate::store::StoreEvent;

/// One wake-up of a controller.
pub struct Batch {
    /// The events since the last wake-up.
    pub events: Vec<Arc<StoreEvent>>,
    /// Events were lost: the controller must resync everything.
    pub resync: bool,
}

/// Waits for events (or `idle`), then drains what is queued. None on shutdown.
pub async fn next_batch(
    rx: &mut broadcast::Receiver<Arc<StoreEvent>>,
    shutdown: &mut watch::Receiver<bool>,
    idle: Duration,
) -> Option<Batch> {
    let mut b = Batch {
        events: Vec::new(),
        resync: false,
    };
    if *shutdown.borrow() {
        return None;
    }
    tokio::select! {
        r = rx.recv() => match r {
            Ok(ev) => b.events.push(ev),
            Err(broadcast::error::RecvError::Lagged(_)) => b.resync = true,
            Err(broadcast::error::RecvError::Closed) => return None,
        },
        _ = tokio::time::sleep(idle) => {}
        _ = shutdown.changed() => return None,
    }
    loop {
        match rx.try_recv() {
            Ok(ev) => b.events.push(ev),
            Err(broadcast::error::TryRecvError::Lagged(_)) => b.resync = true,
            Err(_) => break,
        }
    }
    Some(b)
}
