//! Docs that cannot drift from the code. The flag tables of docs/configuration.md and
//! docs/development.md are generated from the clap definitions (`flag_tables`); every
//! `DrainBlocked` reason and every metric has its row in docs/operations.md and
//! docs/observability.md, read from the code's enum and from the registry `/metrics` serves
//! (`names`); the shell commands of the README and of docs/ use only subcommands, flags, cargo
//! targets and paths that exist (`commands`). Each failure says what to add or which command
//! to run.

mod commands;
mod flag_tables;
mod markdown;
mod names;
