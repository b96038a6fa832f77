//! What the node actor's watches have delivered, where its operations can wait for it (a leaf:
//! the watches fill it, the operations read it).

use std::time::Duration;

use tokio::sync::watch;

use crate::model::NodeState;

/// What a watch has delivered: None until it delivers (then the operation asks the API).
pub(crate) type Seen<T> = watch::Receiver<Option<T>>;

/// The Node as its watch last delivered it (`Some(None)`: the Node does not exist).
pub(crate) type SeenNode = Seen<Option<NodeState>>;

/// Waits at most `within` for what `seen` has delivered; None if it delivered nothing by then
/// (the watch cannot reach the API, or was stopped).
pub(crate) async fn first_seen<T: Clone>(mut seen: Seen<T>, within: Duration) -> Option<T> {
    match tokio::time::timeout(within, seen.wait_for(Option::is_some)).await {
        Ok(Ok(value)) => value.clone(),
        _ => None,
    }
}
