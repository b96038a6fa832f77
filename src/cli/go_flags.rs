//! The Go operator's command-line conventions (Go's `flag` package), so that its Deployments
//! and CSVs run nmo unchanged: booleans as `--flag`, `--flag=true` or `--flag=false`, and long
//! flags written with one dash (`-leader-elect`).

use std::ffi::OsString;

/// A boolean as Go's `strconv.ParseBool` reads it: `1 t T TRUE true True` and
/// `0 f F FALSE false False`.
pub fn parse_go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("`{text}` is not a boolean (true or false)")),
    }
}

/// Rewrites `-name` and `-name=value` to `--name...` where `name` is one of `long_names`:
/// Go's flags take one dash or two alike, clap only two for long names. Anything else (short
/// flags such as `-h`, values, arguments after `--`) is left alone.
pub fn normalize_single_dash<I>(args: I, long_names: &[String]) -> Vec<OsString>
where
    I: IntoIterator<Item = OsString>,
{
    let mut after_separator = false;
    args.into_iter()
        .map(|arg| {
            if after_separator {
                return arg;
            }
            let Some(text) = arg.to_str() else {
                return arg;
            };
            if text == "--" {
                after_separator = true;
                return arg;
            }
            let Some(rest) = text.strip_prefix('-') else {
                return arg;
            };
            if rest.starts_with('-') {
                return arg;
            }
            let name = rest.split_once('=').map_or(rest, |(name, _)| name);
            if name.len() > 1 && long_names.iter().any(|long| long == name) {
                OsString::from(format!("-{text}"))
            } else {
                arg
            }
        })
        .collect()
}

/// Every long flag name of `command` and its subcommands.
pub fn long_names(command: &clap::Command) -> Vec<String> {
    let mut names: Vec<String> = command
        .get_arguments()
        .filter_map(|arg| arg.get_long().map(str::to_string))
        .collect();
    for sub in command.get_subcommands() {
        names.extend(long_names(sub));
    }
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_booleans() {
        for yes in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(yes), Ok(true));
        }
        for no in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(no), Ok(false));
        }
        assert!(parse_go_bool("yes").is_err());
        assert!(parse_go_bool("").is_err());
    }

    #[test]
    fn one_dash_long_flags_get_two() {
        let names = vec!["leader-elect".to_string(), "zap-log-level".to_string()];
        let args = [
            "/manager",
            "-leader-elect",
            "-zap-log-level=debug",
            "-h",
            "--leader-elect=false",
            "-unknown",
            "--",
            "-leader-elect",
        ]
        .map(OsString::from);
        let normalized = normalize_single_dash(args, &names);
        assert_eq!(
            normalized,
            [
                "/manager",
                "--leader-elect",
                "--zap-log-level=debug",
                "-h",
                "--leader-elect=false",
                "-unknown",
                "--",
                "-leader-elect",
            ]
            .map(OsString::from)
        );
    }
}
