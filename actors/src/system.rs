//! Starting and stopping the actor system.

use std::sync::Arc;

use ractor::{Actor, ActorRef, SpawnErr};

use crate::call_deadline::Bounded;
use crate::config::Config;
use crate::eviction::{EvictionActor, EvictionArgs, EvictionMsg};
use crate::ports::Cluster;
use crate::supervisor::{Supervisor, SupervisorArgs, SupervisorMsg};

/// Starting the actor system failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// An actor could not be spawned (e.g. its name is taken).
    #[error("cannot spawn the {actor} actor")]
    Spawn {
        /// Which actor.
        actor: &'static str,
        /// Why.
        #[source]
        source: SpawnErr,
    },
}

/// The running actors.
pub struct ActorSystem {
    /// Feed it the NodeMaintenance objects (see [`SupervisorMsg`]).
    pub supervisor: ActorRef<SupervisorMsg>,
    /// The shared eviction actor.
    pub evictor: ActorRef<EvictionMsg>,
}

impl ActorSystem {
    /// Stops every actor and waits for them, and for every cluster call they had in flight to
    /// be aborted: once this returns, nothing of this actor system can reach the API server
    /// (a leader hands over only after this). The eviction actor stops first, so that no
    /// queued eviction goes out while the node actors stop. Node changes stay as they are: a
    /// restarted nmo picks each maintenance up from the cluster.
    pub async fn shutdown(self) {
        if let Err(err) = self.evictor.stop_and_wait(None, None).await {
            tracing::warn!(error = %err, "eviction actor did not stop cleanly");
        }
        if let Err(err) = self.supervisor.stop_and_wait(None, None).await {
            tracing::warn!(error = %err, "supervisor did not stop cleanly");
        }
    }
}

/// Starts the eviction actor and the supervisor. Actor names are derived from
/// `config.actor_name_prefix` (`<prefix>supervisor`, `<prefix>eviction`), or unnamed if None.
pub async fn start(cluster: Arc<dyn Cluster>, config: Config) -> Result<ActorSystem, StartError> {
    let config = Arc::new(config);
    // Every call the actors make has a deadline: no hung connection can freeze them.
    let cluster: Arc<dyn Cluster> = Arc::new(Bounded::new(
        cluster,
        config.call_timeout,
        config.call_places,
    ));
    let name = |what: &str| {
        config
            .actor_name_prefix
            .as_ref()
            .map(|prefix| format!("{prefix}{what}"))
    };
    let (evictor, _) = Actor::spawn(
        name("eviction"),
        EvictionActor,
        EvictionArgs {
            cluster: cluster.clone(),
            config: config.clone(),
        },
    )
    .await
    .map_err(|source| StartError::Spawn {
        actor: "eviction",
        source,
    })?;
    let spawned = Actor::spawn(
        name("supervisor"),
        Supervisor,
        SupervisorArgs {
            cluster,
            config: config.clone(),
            evictor: evictor.clone(),
        },
    )
    .await;
    let supervisor = match spawned {
        Ok((supervisor, _)) => supervisor,
        Err(source) => {
            evictor.stop(None);
            return Err(StartError::Spawn {
                actor: "supervisor",
                source,
            });
        }
    };
    Ok(ActorSystem {
        supervisor,
        evictor,
    })
}
