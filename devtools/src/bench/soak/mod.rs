//! The fault soak (`nmo bench --scenario soak`, or `soak-ci` for the CI-sized run): NodeMaintenances
//! created and deleted in waves while the simulated API server answers a tenth of the
//! replicas' requests with 500, 409 or 429, drops their watches, answers some of their requests
//! later than their call deadline, and the leading replica is killed (SIGKILL) several times,
//! so that leadership fails over between two `nmo run --leader-elect` processes.
//!
//! After the waves the API server is restarted (`restarts`): every connection dropped, 503 for
//! the outage, then 410 on every resumed watch; new NodeMaintenances created at its return are
//! timed until reconciled (the recovery time, p50 and max). Then another operator takes over
//! the node leases of a few maintenances: each must give up (Failed, `errorOnLeaseCount` above
//! 3) without nmo writing the holder's lease (the time to Failed, p50 and max).
//!
//! Each leader is killed with the writes it sends in its last moment held by the network (the
//! simulator delivers them after its successor took over), and the cluster meets situations
//! nmo must get right meanwhile (`injections`): a person's cordon whose record is removed
//! mid-maintenance, a node lease another operator holds with its clock ahead of nmo's, a
//! DaemonSet created again under the same name.
//!
//! Checked at the end, and printed: every maintenance converged (the deleted ones gone with
//! their node fully given back, the others Succeeded with their node in maintenance), no node
//! left marked without a NodeMaintenance, every node given back as it was before its
//! maintenance (a person's cordon kept), no DaemonSet or mirror pod evicted, no pod deleted
//! while a budget covering it allowed no disruption, no write by a replica that did not hold
//! the leader lease at that instant (the simulator's audit hook sees each write as it takes
//! effect), no write held across a handover landing over the successor's, no foreign lease
//! taken nor its node touched, and the replicas' peak memory.

mod audit;
mod config;
mod end_state;
mod injections;
mod late_writes;
mod replicas;
mod report;
mod restarts;
mod takeovers;
mod violations;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::api::DeleteParams;
use kube::{Api, Client};
use nmo_sim::{ClientOptions, FaultRule, Query, SimConfig, SimHandle, Simulator};
use serde_json::Value;

use super::error::BenchError;
use audit::Audit;
pub use config::SoakConfig;
use config::{create_maintenance, nm_name};
use end_state::EndState;
use injections::Injections;
use nmo::crd::NodeMaintenance;
use nmo::leader::LEADER_ELECTION_ID;
use replicas::Replicas;
pub use report::{Check, SoakReport};

/// The replicas: name, user (token identity), token.
const REPLICAS: [(&str, &str, &str); 2] = [
    ("a", "nmo-a", "soak-token-a"),
    ("b", "nmo-b", "soak-token-b"),
];
const DRIVER_USER: &str = "soak-driver";
const DRIVER_TOKEN: &str = "soak-driver-token";
/// Where the replicas elect their leader (their kubeconfig's namespace).
const LEADER_NAMESPACE: &str = "default";
/// How often the driver looks at the cluster and tends the replicas.
const POLL: Duration = Duration::from_millis(200);
/// A killed replica comes back after this long even if the other never took over.
const REVIVE_ANYWAY: Duration = Duration::from_secs(30);

/// Runs the soak with the operator binary `nmo`; scratch files (kubeconfigs, logs) go to
/// `dir`. The report says whether every check passed.
pub async fn run(config: &SoakConfig, nmo: &Path, dir: &Path) -> Result<SoakReport, BenchError> {
    let mut sim_config = SimConfig::default()
        .scenario(config.scenario())
        .crd(&nmo::crd::definition())?
        .token(DRIVER_TOKEN, DRIVER_USER);
    for (_, user, token) in REPLICAS {
        sim_config = sim_config.token(token, user);
    }
    sim_config.timing.time_scale = 0.0;
    let sim = Simulator::start(sim_config).await?;
    let outcome = soak(&sim, config, nmo, dir).await;
    sim.set_audit_hook(None);
    sim.shutdown().await;
    outcome
}

/// The faults every request of `user` meets.
fn inject_faults(sim: &SimHandle, config: &SoakConfig, user: &str) {
    let share = config.error_rate / 3.0;
    for code in [500, 409, 429] {
        sim.faults()
            .add(FaultRule::on(None, None).user(user).errors(share, code));
    }
    sim.faults().add(
        FaultRule::on(Some("watch"), None)
            .user(user)
            .close_watches_after(Some(config.watch_drop_after), None),
    );
    for verb in ["get", "list", "create", "update", "patch", "delete"] {
        sim.faults().add(
            FaultRule::on(Some(verb), None)
                .user(user)
                .latency_sometimes(config.late_by, config.late_rate),
        );
    }
}

async fn soak(
    sim: &SimHandle,
    config: &SoakConfig,
    nmo: &Path,
    dir: &Path,
) -> Result<SoakReport, BenchError> {
    let audit = Audit::new(LEADER_NAMESPACE);
    sim.set_audit_hook(Some(audit.hook()));
    sim.set_outcome_hook(Some(audit.outcome_hook()));
    let mut injections = Injections::new(audit.clone());
    let mut kubeconfigs: Vec<(&'static str, &str, PathBuf)> = Vec::new();
    for (name, user, token) in REPLICAS {
        let path = dir.join(format!("{}-{name}.kubeconfig", config.name));
        sim.write_kubeconfig_with_token(&path, token)?;
        kubeconfigs.push((name, user, path));
        inject_faults(sim, config, user);
    }
    let client = sim.kube_client_with(&ClientOptions {
        user_agent: "nmo-soak-driver".into(),
        token: Some(DRIVER_TOKEN.into()),
        retry: true,
    })?;
    let started = Instant::now();
    let mut replicas = Replicas::start(
        nmo,
        config.operator_args(),
        &kubeconfigs,
        dir,
        audit.clone(),
    )?;
    let mut leaders = LeaderLog::default();
    let mut waves = Vec::new();
    let mut recoveries = restarts::Recoveries::default();
    let mut takeovers = takeovers::Takeovers::default();
    let outcome = drive(
        sim,
        config,
        &client,
        &mut replicas,
        &mut leaders,
        &mut waves,
        (&mut injections, &mut recoveries, &mut takeovers),
    )
    .await;
    let wall = started.elapsed();
    let figures = replicas.figures();
    let logs: Vec<String> = REPLICAS
        .iter()
        .filter_map(|(name, ..)| replicas.log(name).map(|p| p.display().to_string()))
        .collect();
    replicas.stop();
    outcome?;
    let end = EndState::read(sim, config, injections.admin_cordoned());
    let requests = REPLICAS
        .iter()
        .map(|(name, user, _)| {
            let ours = Query::all().user(user);
            let errors = [500, 409, 429]
                .iter()
                .map(|code| sim.accounting().count_status(&ours, *code))
                .sum();
            ((*name).to_string(), sim.requests(&ours), errors)
        })
        .collect();
    Ok(SoakReport::new(
        config,
        wall,
        &end,
        &audit.findings(),
        &audit.late_writes(),
        figures,
        leaders.changes,
        requests,
        waves,
        (recoveries, takeovers),
        logs,
    ))
}

/// Leadership as the driver saw it.
#[derive(Default)]
struct LeaderLog {
    holder: String,
    changes: u32,
}

impl LeaderLog {
    fn observe(&mut self, sim: &SimHandle) -> String {
        let holder = sim
            .get_json(
                "coordination.k8s.io",
                "leases",
                LEADER_NAMESPACE,
                LEADER_ELECTION_ID,
            )
            .and_then(|l| {
                l.pointer("/spec/holderIdentity")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_default();
        if !holder.is_empty() && holder != self.holder {
            if !self.holder.is_empty() {
                self.changes += 1;
            }
            self.holder.clone_from(&holder);
        }
        holder
    }
}

/// The replica `name`'s user.
fn user_of(name: &str) -> &'static str {
    REPLICAS
        .iter()
        .find(|(replica, ..)| *replica == name)
        .map_or("", |(_, user, _)| user)
}

/// Holds the writes of `user` for [`SoakConfig::handover_late_by`] (delivered then, whatever
/// becomes of their sender); returns the fault rules, to remove once it is killed.
fn hold_writes(sim: &SimHandle, config: &SoakConfig, user: &str) -> Vec<u64> {
    ["create", "update", "patch", "delete"]
        .iter()
        .map(|verb| {
            sim.faults().add(
                FaultRule::on(Some(verb), None)
                    .user(user)
                    .delivered_late(config.handover_late_by, 1.0),
            )
        })
        .collect()
}

// The soak's loop: waves, kills, injections, convergence; one place that says the order.
#[allow(clippy::too_many_lines)]
async fn drive(
    sim: &SimHandle,
    config: &SoakConfig,
    client: &Client,
    replicas: &mut Replicas,
    leaders: &mut LeaderLog,
    wave_times: &mut Vec<f64>,
    (injections, recoveries, takeovers): (
        &mut Injections,
        &mut restarts::Recoveries,
        &mut takeovers::Takeovers,
    ),
) -> Result<(), BenchError> {
    let api: Api<NodeMaintenance> = Api::all(client.clone());
    let waves = config.waves();
    let mut previous: Vec<String> = Vec::new();
    for (index, nodes) in waves.iter().enumerate() {
        let given_back = index + 1 < waves.len();
        injections
            .before_wave(sim, client, index, nodes, given_back)
            .await;
        for node in nodes {
            create_maintenance(&api, node, format!("soak wave {index}")).await;
        }
        for node in &previous {
            if !nodes.contains(node) {
                let _ = api.delete(&nm_name(node), &DeleteParams::default()).await;
            }
        }
        let kill_now = index >= 1 && index <= config.kills;
        let deadline = Instant::now() + config.wave_timeout;
        let mut killed = !kill_now;
        let mut killed_at = None;
        let wave_started = Instant::now();
        loop {
            replicas.tend()?;
            let holder = leaders.observe(sim);
            // Kill the leader while the wave is under way; it comes back (as a standby) once
            // the other replica leads, so that leadership really moves between the two.
            if !killed
                && wave_started.elapsed() >= Duration::from_secs(2)
                && let Some(leader) = replicas.leader(&holder)
            {
                // What it sends in its last moment is on its way when it dies, and arrives
                // after its successor took over.
                let held = hold_writes(sim, config, user_of(leader));
                tokio::time::sleep(config.handover_hold).await;
                replicas.kill(leader);
                for rule in held {
                    sim.faults().remove(rule);
                }
                killed = true;
                killed_at = Some((leader, Instant::now()));
            }
            if let Some((dead, at)) = killed_at
                && replicas.any_down()
                && (replicas.leader(&holder).is_some_and(|l| l != dead)
                    || at.elapsed() > REVIVE_ANYWAY)
            {
                replicas.revive()?;
            }
            let state = EndState::read(sim, config, injections.admin_cordoned());
            injections
                .tend(sim, client, |node| state.succeeded(&nm_name(node)))
                .await;
            let wave_done = nodes.iter().all(|n| state.succeeded(&nm_name(n)));
            let previous_gone = previous
                .iter()
                .filter(|n| !nodes.contains(n))
                .all(|n| !state.exists(&nm_name(n)));
            if killed && wave_done && previous_gone && injections.settled() {
                wave_times.push(wave_started.elapsed().as_secs_f64());
                break;
            }
            if Instant::now() > deadline {
                tracing::warn!(wave = index, "wave did not finish in time, going on");
                wave_times.push(wave_started.elapsed().as_secs_f64());
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        previous.clone_from(nodes);
    }
    replicas.revive()?;
    *recoveries = restarts::run(sim, config, client, replicas).await?;
    *takeovers = takeovers::run(sim, config, client, replicas).await?;
    // The end: the last wave stays, everything else must be given back.
    replicas.revive()?;
    let deadline = Instant::now() + config.converge_timeout;
    loop {
        replicas.tend()?;
        leaders.observe(sim);
        let state = EndState::read(sim, config, injections.admin_cordoned());
        injections
            .tend(sim, client, |node| state.succeeded(&nm_name(node)))
            .await;
        if state.converged() || Instant::now() > deadline {
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
}
