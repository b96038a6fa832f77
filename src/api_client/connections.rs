//! Counts the TCP connections the client opens and holds: with HTTP/2 a few carry everything,
//! so a count that grows with the number of watches is a regression worth seeing.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use tower::Service;

/// Connections opened so far and open now; cheap to clone (the clones share the counts).
#[derive(Debug, Clone, Default)]
pub struct ConnectionCount {
    counts: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    opened: AtomicU64,
    open: AtomicI64,
}

impl ConnectionCount {
    /// Connections opened since the client was built (TCP connections, TLS or not).
    pub fn opened(&self) -> u64 {
        self.counts.opened.load(Ordering::Relaxed)
    }

    /// Connections open now.
    pub fn open(&self) -> i64 {
        self.counts.open.load(Ordering::Relaxed)
    }

    /// Counts a connection as opened, and as open until the returned guard is dropped (for
    /// tests of what reports the counts).
    #[doc(hidden)]
    pub fn count_opened_for_tests(&self) -> OpenGuard {
        self.connected()
    }

    fn connected(&self) -> OpenGuard {
        self.counts.opened.fetch_add(1, Ordering::Relaxed);
        self.counts.open.fetch_add(1, Ordering::Relaxed);
        OpenGuard {
            counts: self.counts.clone(),
        }
    }
}

/// Held by an open connection; closing (dropping) it counts it as closed.
#[derive(Debug)]
pub struct OpenGuard {
    counts: Arc<Counts>,
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.counts.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connector that counts the connections `inner` makes.
#[derive(Debug, Clone)]
pub struct CountingConnector<C> {
    inner: C,
    count: ConnectionCount,
}

impl<C> CountingConnector<C> {
    /// Counts the connections of `inner` in `count`.
    pub fn new(inner: C, count: ConnectionCount) -> Self {
        CountingConnector { inner, count }
    }
}

impl<C> Service<Uri> for CountingConnector<C>
where
    C: Service<Uri>,
    C::Future: Send + 'static,
{
    type Response = Counted<C::Response>;
    type Error = C::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, destination: Uri) -> Self::Future {
        let connecting = self.inner.call(destination);
        let count = self.count.clone();
        Box::pin(async move {
            let io = connecting.await?;
            Ok(Counted {
                io,
                _open: count.connected(),
            })
        })
    }
}

/// A connection counted as open until it is dropped.
#[derive(Debug)]
pub struct Counted<T> {
    io: T,
    _open: OpenGuard,
}

impl<T: Connection> Connection for Counted<T> {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

impl<T: Read + Unpin> Read for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for Counted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_connection_is_no_longer_open_but_stays_counted() {
        let count = ConnectionCount::default();
        let first = count.connected();
        let second = count.connected();
        assert_eq!((count.opened(), count.open()), (2, 2));
        drop(first);
        assert_eq!((count.opened(), count.open()), (2, 1));
        drop(second);
        assert_eq!((count.opened(), count.open()), (2, 0));
    }
}
