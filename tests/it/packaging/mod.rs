//! How nmo is packaged: the kustomize entry points, the release manifest, the OLM bundle, the
//! image's Dockerfile, and the RBAC that all of them carry.

mod bare_install;
mod dockerfile;
mod image;
mod kustomize;
mod monitoring;
mod olm;
mod real_install;
mod release;
pub(crate) mod support;
