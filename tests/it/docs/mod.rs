//! Docs that cannot drift from the code. The flag tables of docs/configuration.md and
//! docs/development.md are generated from the clap definitions (`flag_tables`). Each failure
//! says what to add or which command to run.

mod flag_tables;
mod markdown;
