//! The flag tables of the docs, generated from the clap definitions the binaries parse, as
//! deploy/base/crd.yaml is generated from the CRD's type: between a BEGIN and an END marker, so
//! that the prose around a table stays hand-written. `NMO_REGENERATE=1 cargo test --test it
//! generated_` rewrites them; without the variable the test fails while one differs.

use clap::CommandFactory;
use clap::builder::{Arg, Command};

use super::markdown::{self, begin_marker, end_marker, generated_section};
use crate::packaging::support::{REGENERATE, regenerating, repo};

/// The command that rewrites every generated file and section.
fn how_to_regenerate() -> String {
    format!("{REGENERATE}=1 cargo test --test it generated_")
}

/// Each generated table: the file, the section's name, and the command whose flags it lists.
fn tables() -> Vec<(&'static str, &'static str, Command)> {
    let nmo = nmo::cli::commands::Cli::command();
    let dev = nmo_devtools::cli::Cli::command();
    let sub = |command: &Command, name: &str| {
        command
            .find_subcommand(name)
            .unwrap_or_else(|| panic!("no subcommand {name}"))
            .clone()
    };
    vec![
        ("docs/configuration.md", "nmo run flags", nmo.clone()),
        ("docs/configuration.md", "nmo plan flags", sub(&nmo, "plan")),
        (
            "docs/configuration.md",
            "nmo uninstall flags",
            sub(&nmo, "uninstall"),
        ),
        (
            "docs/development.md",
            "nmo-dev demo flags",
            sub(&dev, "demo"),
        ),
        (
            "docs/development.md",
            "nmo-dev bench flags",
            sub(&dev, "bench"),
        ),
        ("docs/development.md", "nmo-dev sim flags", sub(&dev, "sim")),
    ]
}

/// A Markdown table of `command`'s arguments, in their order of definition (help and version
/// left out, hidden ones too).
pub fn flags_table(command: &Command) -> String {
    let mut command = command.clone();
    // Builds the arguments as parsing would (SetTrue flags get their `false` default).
    command.build();
    let mut out =
        String::from("| flag | environment | default | meaning |\n| --- | --- | --- | --- |\n");
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        if arg.is_hide_set() || id == "help" || id == "version" {
            continue;
        }
        let env = arg
            .get_env()
            .map(|env| format!("`{}`", env.to_string_lossy()))
            .unwrap_or_default();
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            escape(&usage(arg)),
            env,
            default(arg),
            escape(&meaning(arg))
        ));
    }
    out
}

/// How the argument is written: `-l, --selector <SELECTOR>`, `--leader-elect[=BOOL]`,
/// `--keep`, `NODE...`.
fn usage(arg: &Arg) -> String {
    let names = arg
        .get_value_names()
        .map(|names| {
            names
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
    // After `build`, every argument has its number of values (0 for a plain switch); a Go
    // boolean is a switch that also takes `=value` (0..=1).
    let range = arg.get_num_args().unwrap_or_default();
    let dots = if range.max_values() > 1 { "..." } else { "" };
    if arg.is_positional() {
        return format!("{names}{dots}");
    }
    let mut flag = String::new();
    if let Some(short) = arg.get_short() {
        flag.push_str(&format!("-{short}, "));
    }
    if let Some(long) = arg.get_long() {
        flag.push_str(&format!("--{long}"));
    }
    if range.max_values() == 0 {
        flag
    } else if range.min_values() == 0 {
        format!("{flag}[={names}]")
    } else {
        format!("{flag} <{names}>{dots}")
    }
}

fn default(arg: &Arg) -> String {
    let values: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|value| value.to_string_lossy().into_owned())
        .collect();
    match values.as_slice() {
        [] => String::new(),
        [one] if one.is_empty() => "empty".into(),
        _ => format!("`{}`", values.join(", ")),
    }
}

/// The help text on one line, with the values the flag takes when clap knows them.
fn meaning(arg: &Arg) -> String {
    let help = arg
        .get_long_help()
        .or_else(|| arg.get_help())
        .map(|help| help.to_string())
        .unwrap_or_default();
    let mut text = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|value| !value.is_hide_set())
        .map(|value| match value.get_help() {
            Some(help) => format!("`{}`: {help}", value.get_name()),
            None => format!("`{}`", value.get_name()),
        })
        .collect();
    // A Go boolean's values are clap's own true/false: nothing to add.
    let booleans = values.len() == 2 && values.iter().all(|v| v == "`true`" || v == "`false`");
    if !values.is_empty() && !booleans {
        if !text.is_empty() && !text.ends_with('.') {
            text.push('.');
        }
        text.push_str(&format!(" Values: {}.", values.join("; ")));
    }
    text
}

fn escape(cell: &str) -> String {
    cell.replace('|', "\\|")
}

#[test]
fn generated_flag_tables_are_what_clap_defines() {
    let mut failures = Vec::new();
    for (file, section, command) in tables() {
        let mut text = markdown::read(file);
        let generated = flags_table(&command);
        let Some(range) = generated_section(&text, section) else {
            failures.push(format!(
                "{file} has no generated section `{section}`: add the two lines\n    {}\n    {}\n  where the table belongs, then run {}",
                begin_marker(section),
                end_marker(section),
                how_to_regenerate()
            ));
            continue;
        };
        if text[range.clone()] == generated {
            continue;
        }
        if regenerating() {
            text.replace_range(range, &generated);
            std::fs::write(repo().join(file), text).expect("the doc is writable");
            continue;
        }
        let on_disk: Vec<&str> = text[range]
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        let wanted: Vec<&str> = generated.lines().collect();
        let missing: Vec<&str> = wanted
            .iter()
            .filter(|l| !on_disk.contains(l))
            .copied()
            .collect();
        let extra: Vec<&str> = on_disk
            .iter()
            .filter(|l| !wanted.contains(l))
            .copied()
            .collect();
        let mut failure =
            format!("{file}: the table `{section}` differs from the flags clap defines.");
        for (side, rows) in [
            ("clap has, the doc lacks", &missing),
            ("the doc has, clap lacks", &extra),
        ] {
            if !rows.is_empty() {
                failure.push_str(&format!("\n  {side}:\n    {}", rows.join("\n    ")));
            }
        }
        failures.push(failure);
    }
    assert!(
        failures.is_empty(),
        "{}\nRegenerate the tables with: {} (and review the diff; the prose around them is \
         hand-written: say there what a new flag is for)",
        failures.join("\n"),
        how_to_regenerate()
    );
}

#[test]
fn a_flag_table_lists_every_visible_flag_with_its_default_and_environment() {
    #[derive(clap::Parser)]
    struct Probe {
        /// Where to go.
        #[arg(long, env = "PROBE_WHERE", default_value = ":80")]
        address: String,
        /// A Go boolean.
        #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false",
              default_missing_value = "true", value_name = "BOOL",
              value_parser = nmo::cli::go_flags::parse_go_bool)]
        enable: bool,
        /// Pipe | in help.
        #[arg(short, long)]
        keep: bool,
        /// Not for users.
        #[arg(long, hide = true)]
        secret: bool,
        /// The nodes.
        nodes: Vec<String>,
    }
    let table = flags_table(&Probe::command());
    assert_eq!(
        table,
        "| flag | environment | default | meaning |\n| --- | --- | --- | --- |\n\
         | `--address <ADDRESS>` | `PROBE_WHERE` | `:80` | Where to go |\n\
         | `--enable[=BOOL]` |  | `false` | A Go boolean |\n\
         | `-k, --keep` |  | `false` | Pipe \\| in help |\n\
         | `NODES...` |  |  | The nodes |\n"
    );
}
