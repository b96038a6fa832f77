//! The shape KubeVirt's and Strimzi's emulations share: an admission webhook on
//! `pods/eviction` that reviews with the emulation's log at hand, and a controller task that
//! acts on what the webhook decided, both alive until the emulation stops.

use std::future::Future;
use std::sync::{Arc, Mutex};

use super::webhook::{Eviction, Verdict, WebhookServer, unregister};
use super::{EmulationError, lock};

/// A running interceptor emulation, with its log of type `L`.
pub(crate) struct Interceptor<L> {
    client: kube::Client,
    /// The ValidatingWebhookConfiguration it registered its webhook in.
    configuration: &'static str,
    log: Arc<Mutex<L>>,
    /// Serves while the emulation lives.
    _webhook: WebhookServer,
    controller: tokio::task::JoinHandle<()>,
}

impl<L: Default + Send + 'static> Interceptor<L> {
    /// Starts the webhook `review` (registered as `webhook` in `configuration` with the API
    /// server of `client`) and the task `controller` makes, both given the log.
    pub(crate) async fn start<R, Reviewed, Controller>(
        client: &kube::Client,
        configuration: &'static str,
        webhook: &str,
        review: R,
        controller: impl FnOnce(Arc<Mutex<L>>) -> Controller,
    ) -> Result<Self, EmulationError>
    where
        R: Fn(kube::Client, Arc<Mutex<L>>, Eviction) -> Reviewed + Send + Sync + 'static,
        Reviewed: Future<Output = Verdict> + Send + 'static,
        Controller: Future<Output = ()> + Send + 'static,
    {
        let log = Arc::new(Mutex::new(L::default()));
        let (hook_client, hook_log) = (client.clone(), log.clone());
        let server = WebhookServer::start(move |eviction| {
            review(hook_client.clone(), hook_log.clone(), eviction)
        })
        .await?;
        server.register(client, configuration, webhook).await?;
        let controller = tokio::spawn(controller(log.clone()));
        Ok(Interceptor {
            client: client.clone(),
            configuration,
            log,
            _webhook: server,
            controller,
        })
    }
}

impl<L: Clone> Interceptor<L> {
    /// What it did so far.
    pub(crate) fn log(&self) -> L {
        lock(&self.log).clone()
    }
}

impl<L> Interceptor<L> {
    /// Unregisters the webhook and stops the controller (the server stops with `self`).
    pub(crate) async fn stop(self) {
        self.controller.abort();
        unregister(&self.client, self.configuration).await;
    }
}

impl<L> Drop for Interceptor<L> {
    fn drop(&mut self) {
        self.controller.abort();
    }
}
