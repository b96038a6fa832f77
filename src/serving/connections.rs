//! The connections a server holds, capped. A connection is *busy* while one of its requests is
//! being handled and *idle* otherwise (connecting, in its TLS handshake, sending its headers,
//! or kept alive between requests). At the cap, a new connection takes the place of the oldest
//! idle one, which is closed: a client that opens connections and sends nothing (or trickles
//! its headers) can hold at most the cap, and a client that sends its request at once, as a
//! kubelet probe or a Prometheus scrape does, is always let in. Only when every connection is
//! busy is a new one refused.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio::time::Instant;

/// The open connections of one server.
#[derive(Debug)]
pub struct ConnectionTable {
    cap: usize,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    /// By admission order: the first entry is the oldest.
    connections: BTreeMap<u64, Arc<Connection>>,
    next_id: u64,
}

/// One open connection's state, shared by its task and its requests.
#[derive(Debug)]
pub struct Connection {
    in_flight: AtomicUsize,
    last_active: Mutex<Instant>,
    closing: Notify,
}

/// What admission decided.
#[derive(Debug)]
pub enum Admission {
    /// The connection may be served; dropping the ticket removes it from the table.
    Admitted(Ticket),
    /// Every connection is busy: the new one is refused.
    Full,
}

/// An admitted connection's place in the table.
#[derive(Debug)]
pub struct Ticket {
    table: Arc<ConnectionTable>,
    id: u64,
    connection: Arc<Connection>,
}

/// Held while a request is handled: the connection counts as busy.
#[derive(Debug)]
pub struct Busy(Arc<Connection>);

impl ConnectionTable {
    /// A table holding at most `cap` connections (at least one).
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(ConnectionTable {
            cap: cap.max(1),
            open: Mutex::new(Open::default()),
        })
    }

    fn open(&self) -> MutexGuard<'_, Open> {
        // The map stays consistent whatever panicked while holding it.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        self.open().connections.len()
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Admits a new connection, closing the oldest idle one at the cap.
    pub fn admit(self: &Arc<Self>) -> Admission {
        let mut open = self.open();
        if open.connections.len() >= self.cap {
            let oldest_idle = open
                .connections
                .iter()
                .find(|(_, connection)| connection.is_idle())
                .map(|(id, _)| *id);
            let Some(id) = oldest_idle else {
                return Admission::Full;
            };
            if let Some(evicted) = open.connections.remove(&id) {
                evicted.closing.notify_one();
            }
        }
        let id = open.next_id;
        open.next_id += 1;
        let connection = Arc::new(Connection {
            in_flight: AtomicUsize::new(0),
            last_active: Mutex::new(Instant::now()),
            closing: Notify::new(),
        });
        open.connections.insert(id, Arc::clone(&connection));
        Admission::Admitted(Ticket {
            table: Arc::clone(self),
            id,
            connection,
        })
    }
}

impl Connection {
    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    fn touch(&self) {
        *self
            .last_active
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn last_active(&self) -> Instant {
        *self
            .last_active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Ticket {
    /// A handle for the connection's requests to mark it busy with.
    pub fn requests(&self) -> Requests {
        Requests(Arc::clone(&self.connection))
    }

    /// Completes when the connection must close: a newer one took its place at the cap, or
    /// it has been idle (no request handled) for `idle_timeout` since it opened or since its
    /// last request.
    pub async fn closed(&self, idle_timeout: std::time::Duration) {
        tokio::select! {
            () = self.connection.closing.notified() => {}
            () = idle_for(&self.connection, idle_timeout) => {}
        }
    }
}

/// Marks a connection busy from its request handlers.
#[derive(Debug, Clone)]
pub struct Requests(Arc<Connection>);

impl Requests {
    /// Busy until the guard is dropped.
    pub fn busy(&self) -> Busy {
        self.0.in_flight.fetch_add(1, Ordering::AcqRel);
        self.0.touch();
        Busy(Arc::clone(&self.0))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.table.open().connections.remove(&self.id);
    }
}

/// Completes once `connection` has been idle for `timeout`.
async fn idle_for(connection: &Connection, timeout: std::time::Duration) {
    loop {
        if connection.is_idle() {
            let deadline = connection.last_active() + timeout;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        } else {
            // A request in progress: look again a timeout later (it touches the connection
            // when it ends, so the idle time counts from then).
            tokio::time::sleep(timeout).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn admitted(admission: Admission) -> Ticket {
        match admission {
            Admission::Admitted(ticket) => ticket,
            Admission::Full => panic!("refused"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_the_oldest_idle_connection_makes_room() {
        let table = ConnectionTable::new(2);
        let first = admitted(table.admit());
        let second = admitted(table.admit());
        let _busy = first.requests().busy();
        // `first` is busy: `second`, idle, is the one closed.
        let third = admitted(table.admit());
        assert_eq!(table.len(), 2);
        tokio::time::timeout(
            Duration::from_millis(1),
            second.closed(Duration::from_secs(60)),
        )
        .await
        .expect("the idle connection is told to close");
        let still_open = tokio::time::timeout(
            Duration::from_millis(1),
            first.closed(Duration::from_secs(60)),
        )
        .await;
        assert!(still_open.is_err(), "the busy one stays");
        drop(third);
        assert_eq!(table.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn when_every_connection_is_busy_a_new_one_is_refused() {
        let table = ConnectionTable::new(1);
        let only = admitted(table.admit());
        let busy = only.requests().busy();
        assert!(matches!(table.admit(), Admission::Full));
        drop(busy);
        assert!(matches!(table.admit(), Admission::Admitted(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_closes_after_its_idle_time_counted_from_its_last_request() {
        let table = ConnectionTable::new(4);
        let ticket = admitted(table.admit());
        let idle = Duration::from_secs(10);
        tokio::time::sleep(Duration::from_secs(8)).await;
        drop(ticket.requests().busy());
        let started = Instant::now();
        ticket.closed(idle).await;
        assert_eq!(started.elapsed(), idle, "idle from the last request");

        let handled = admitted(table.admit());
        let busy = handled.requests().busy();
        let waited = tokio::time::timeout(Duration::from_secs(60), handled.closed(idle)).await;
        assert!(waited.is_err(), "never closed while a request runs");
        drop(busy);
    }
}
