//! The one integration test binary (each test binary is large and slow to link).

mod api_requests;
mod connections;
mod conventions;
mod crd;
mod demo;
mod docs;
mod go_command_line;
mod interceptors;
mod logs;
mod manifests;
mod metrics;
mod metrics_auth;
mod obs_support;
mod observability_e2e;
mod operator;
mod otlp_receiver;
mod packaging;
mod plan;
mod probes;
mod soak;
mod support;
mod traces;
mod uninstall;
mod webhook;
