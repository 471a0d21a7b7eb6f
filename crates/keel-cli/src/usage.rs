//! Usage errors a person reads: clap's several-line reports folded into the one line keel
//! promises (what is wrong, then how to fix it), and the checks clap cannot make.

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// What to print and the exit code for a command line clap refused. Help and version are
/// not errors: they print as clap renders them, on stdout, with exit 0.
/// `args` is the command line as given (program name first).
pub(crate) fn clap_failure<I, S>(err: &clap::Error, args: I) -> (String, u8)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    match err.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => (err.render().to_string(), 0),
        _ => (format!("keel: {}", one_line(err, &command_path(args))), 2),
    }
}

/// One line: clap's message without its `error: ` prefix, the allowed values or clap's tip
/// when it has them, and where to read more.
fn one_line(err: &clap::Error, command: &str) -> String {
    let rendered = err.render().to_string();
    let mut lines = rendered
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty());
    let first = lines.next().unwrap_or("the command line is not valid");
    let mut message = first.strip_prefix("error: ").unwrap_or(first).to_owned();
    let extra: Vec<&str> = lines
        .filter(|line| {
            !line.starts_with("Usage:")
                && !line.starts_with("For more information")
                && !line.starts_with("keel ")
        })
        .collect();
    if err.kind() == ErrorKind::MissingRequiredArgument
        && let Some(missing) = context_list(err, ContextKind::InvalidArg)
    {
        message = message.trim_end_matches(':').to_owned();
        message.push_str(&format!(": {missing}"));
    } else if let Some(valid) = context_list(err, ContextKind::ValidValue) {
        message.push_str(&format!("; use one of: {valid}"));
    } else if let Some(suggested) = context_list(err, ContextKind::SuggestedArg)
        .or_else(|| context_list(err, ContextKind::SuggestedSubcommand))
    {
        message.push_str(&format!("; did you mean {suggested}?"));
    } else if let Some(tip) = extra.iter().find_map(|line| line.strip_prefix("tip: ")) {
        message.push_str(&format!("; {tip}"));
    }
    message.push_str(&format!(" (see `{command} --help`)"));
    message
}

/// A context value clap recorded for the error, as `a, b, c`.
fn context_list(err: &clap::Error, kind: ContextKind) -> Option<String> {
    match err.get(kind)? {
        ContextValue::String(value) => Some(value.clone()),
        ContextValue::Strings(values) if !values.is_empty() => Some(
            values
                .iter()
                .map(|value| format!("'{value}'"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        _ => None,
    }
}

/// `keel`, `keel exec` or `keel tasks show`: the (sub)command whose help to read, from the
/// words of `args` that name subcommands.
fn command_path<I, S>(args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut command = <crate::cli::Cli as clap::CommandFactory>::command();
    // Subcommands are deferred: built here so that their own subcommands can be found.
    command.build();
    let mut path = vec!["keel".to_owned()];
    for arg in args.into_iter().skip(1) {
        let Some(word) = arg.as_ref().to_str() else {
            continue;
        };
        if let Some(sub) = command.find_subcommand(word) {
            path.push(sub.get_name().to_owned());
            let sub = sub.clone();
            command = sub;
        }
    }
    path.join(" ")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Cli;

    fn failure(args: &[&str]) -> (String, u8) {
        let err = Cli::try_parse_from(args)
            .and_then(Cli::into_parts)
            .expect_err("the command line should be refused");
        clap_failure(&err, args)
    }

    #[test]
    fn every_refused_command_line_is_one_line_with_the_fix() {
        let cases: &[(&[&str], &str)] = &[
            (&["keel", "--bogus"], "unexpected argument '--bogus' found"),
            (
                &["keel", "exec", "--output-format", "xml", "hi"],
                "use one of: 'text', 'json', 'stream-json' (see `keel exec --help`)",
            ),
            (&["keel", "--max-iterations", "x"], "invalid digit"),
            (&["keel", "--max-iterations", "0"], "(see `keel --help`)"),
            (&["keel", "exce", "hi"], "did you mean 'exec'?"),
            (&["keel", "-y", "--approvals", "ask"], "cannot be used with"),
            (
                &["keel", "tasks", "show"],
                "provided: '<ID>' (see `keel tasks show --help`)",
            ),
            (&["keel", "-y", "--approvals", "ask"], "(see `keel --help`)"),
            // Kept apart across the flags before and after the subcommand too.
            (
                &["keel", "-y", "exec", "--approvals", "deny", "hi"],
                "the argument '--yes' cannot be used with '--approvals <MODE>' (see `keel exec \
                 --help`)",
            ),
            (
                &["keel", "--resume", "abc", "exec", "-c", "hi"],
                "the argument '--continue' cannot be used with '--resume <ID>'",
            ),
            (
                &["keel", "tasks", "show", "--bogus"],
                "(see `keel tasks show --help`)",
            ),
        ];
        for (args, expected) in cases {
            let (text, code) = failure(args);
            assert_eq!(code, 2, "{args:?}");
            assert_eq!(text.lines().count(), 1, "{args:?} gave:\n{text}");
            assert!(text.starts_with("keel: "), "{args:?} gave: {text}");
            assert!(text.contains(expected), "{args:?} gave: {text}");
        }
    }

    #[test]
    fn help_and_version_are_not_errors() {
        let (text, code) = failure(&["keel", "--help"]);
        assert_eq!(code, 0);
        assert!(text.contains("Usage:"));
        let (text, code) = failure(&["keel", "--version"]);
        assert_eq!(code, 0);
        assert!(text.starts_with("keel "));
    }
}
