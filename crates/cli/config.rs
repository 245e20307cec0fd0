//! Configuration files for the daemons (`server`, `testbed serve`, `monitor run`, `agent`): each
//! reads `/etc/longhaul/NAME.toml` when it exists, or the file `--config FILE` names. Every long
//! flag is a key (`max-tests = 16` or `max_tests = 16`; a switch takes `true` or `false`; a flag
//! given many times takes an array), the command line overrides the file, and a key that is no flag
//! or a value its flag refuses is an error naming the file, the line and the key. `--print-config`
//! prints the settings in effect, each with where it came from, as a file this module reads back.
//!
//! The file is turned into flags before the command line is parsed, so a setting is checked by the
//! same parser, with the same defaults and ranges, whichever way it is given.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Args, Command};
use toml::de::{DeTable, DeValue};

/// The flags every daemon has for its configuration file.
#[derive(Args, Debug, Clone)]
pub(crate) struct ConfigArgs {
    /// Read settings from this TOML file (keys are the long flags; the command line wins). Default:
    /// /etc/longhaul/NAME.toml when it exists (NAME: server, testbed, monitor, agent).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Print the settings in effect (defaults, the file's, the command line's), as a configuration
    /// file, and exit.
    #[arg(long)]
    pub(crate) print_config: bool,
}

/// A daemon: its subcommand path and the name of its file in /etc/longhaul.
struct Daemon {
    path: &'static [&'static str],
    name: &'static str,
}

const DAEMONS: [Daemon; 4] = [
    Daemon {
        path: &["server"],
        name: "server",
    },
    Daemon {
        path: &["testbed", "serve"],
        name: "testbed",
    },
    Daemon {
        path: &["monitor", "run"],
        name: "monitor",
    },
    Daemon {
        path: &["agent"],
        name: "agent",
    },
];

/// Where the daemons' files are by default.
pub(crate) const CONFIG_DIR: &str = "/etc/longhaul";

/// Flags that are not settings.
const NOT_SETTINGS: [&str; 4] = ["help", "version", "config", "print-config"];

/// What to do with the command line.
pub(crate) enum Plan {
    /// Parse these arguments (the file's flags, then the command line's).
    Run(Vec<OsString>),
    /// `--print-config`: print this and exit.
    Print(String),
}

/// A configuration file that cannot be used: `FILE:LINE: KEY: WHAT`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ConfigError(String);

/// The arguments to parse for `args` (as the process got them): unchanged unless they run a daemon
/// that has a configuration file.
pub(crate) fn plan(cli: &Command, args: Vec<OsString>) -> Result<Plan, ConfigError> {
    // Arguments clap refuses are left for the real parse to report; a required flag may still come
    // from the file.
    let Ok(matches) = cli.clone().ignore_errors(true).try_get_matches_from(&args) else {
        return Ok(Plan::Run(args));
    };
    let Some((daemon, cmd, sub)) = DAEMONS.iter().find_map(|d| {
        let (cmd, sub) = descend(cli, &matches, d.path)?;
        Some((d, cmd, sub))
    }) else {
        return Ok(Plan::Run(args));
    };
    // (Lenient matches: a flag clap could not read is absent, never a panic.)
    let named = sub.try_get_one::<PathBuf>("config").ok().flatten().cloned();
    let file = named.or_else(|| {
        let default = Path::new(CONFIG_DIR).join(format!("{}.toml", daemon.name));
        default.exists().then_some(default)
    });
    let (merged, from_file) = match &file {
        Some(path) => {
            let (flags, ids) = flags_from_file(cmd, sub, path)?;
            (insert_after(args, daemon.path, flags), ids)
        }
        None => (args, Vec::new()),
    };
    if !sub
        .try_get_one::<bool>("print_config")
        .ok()
        .flatten()
        .copied()
        .unwrap_or(false)
    {
        return Ok(Plan::Run(merged));
    }
    let matches = cli
        .clone()
        .try_get_matches_from(&merged)
        .map_err(|e| ConfigError(e.to_string().trim_start_matches("error: ").to_owned()))?;
    let (cmd, sub) = descend(cli, &matches, daemon.path).expect("the same subcommand");
    Ok(Plan::Print(print(
        cmd,
        sub,
        file.as_deref(),
        &from_file,
        daemon,
    )))
}

/// The subcommand `path` of `cli` and its matches, when `matches` ran it.
fn descend<'a>(
    cli: &'a Command,
    matches: &'a ArgMatches,
    path: &[&str],
) -> Option<(&'a Command, &'a ArgMatches)> {
    let (mut cmd, mut m) = (cli, matches);
    for name in path {
        let (sub_name, sub_m) = m.subcommand()?;
        if sub_name != *name {
            return None;
        }
        cmd = cmd.find_subcommand(name)?;
        m = sub_m;
    }
    Some((cmd, m))
}

/// `args` with `extra` right after the subcommand `path` (before the command line's own flags, so
/// those come last).
fn insert_after(args: Vec<OsString>, path: &[&str], extra: Vec<OsString>) -> Vec<OsString> {
    let mut at = 1;
    for name in path {
        if let Some(i) = args[at..].iter().position(|a| a == *name) {
            at += i + 1;
        }
    }
    let mut out = args[..at].to_vec();
    out.extend(extra);
    out.extend_from_slice(&args[at..]);
    out
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The flags the file at `path` sets, but those the command line gives (it wins), and the ids of
/// the settings it gave.
fn flags_from_file(
    cmd: &Command,
    given: &ArgMatches,
    path: &Path,
) -> Result<(Vec<OsString>, Vec<String>), ConfigError> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| ConfigError(format!("{shown}: {e}")))?;
    let mode = meta.permissions().mode();
    if mode & 0o022 != 0 {
        return Err(ConfigError(format!(
            "{shown}: group or others may write it (mode {:04o}): a daemon's settings must not be \
             theirs to change; chmod go-w it",
            mode & 0o7777
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError(format!("{shown}: {e}")))?;
    let table = DeTable::parse(&text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(&text, s.start));
        ConfigError(format!("{shown}:{line}: {}", e.message()))
    })?;
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name()).to_owned();
    let mut out = Vec::new();
    let mut ids = Vec::new();
    for (key, value) in table.get_ref() {
        let line = line_of(&text, key.span().start);
        let key = key.get_ref().as_ref();
        let at = |what: String| ConfigError(format!("{shown}:{line}: {key}: {what}"));
        let long = key.replace('_', "-");
        let Some(arg) = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()))
            .filter(|_| !NOT_SETTINGS.contains(&long.as_str()))
        else {
            let keys: Vec<&str> = cmd
                .get_arguments()
                .filter_map(|a| a.get_long())
                .filter(|l| !NOT_SETTINGS.contains(l))
                .collect();
            return Err(at(format!(
                "unknown key: `longhaul {name}` has no --{long} (its keys: {})",
                keys.join(", ")
            )));
        };
        if given.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine) {
            continue;
        }
        ids.push(arg.get_id().to_string());
        let switch = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
        let values: Vec<String> = match value.get_ref() {
            DeValue::Boolean(b) if switch => {
                let on = matches!(arg.get_action(), ArgAction::SetTrue) == *b;
                if on {
                    out.push(format!("--{long}").into());
                }
                continue;
            }
            _ if switch => return Err(at("a switch: give true or false".into())),
            DeValue::Array(items) => items
                .iter()
                .map(|v| scalar(v.get_ref()).ok_or_else(|| at("an array of tables".into())))
                .collect::<Result<_, _>>()?,
            v => vec![scalar(v).ok_or_else(|| at("a table is not a value".into()))?],
        };
        if values.len() > 1
            && !matches!(arg.get_action(), ArgAction::Append)
            && arg.get_value_delimiter().is_none()
        {
            return Err(at("takes one value, not an array".into()));
        }
        for v in values {
            // The flag's own parser judges the value: the subcommand parses it alone.
            let flag = format!("--{long}={v}");
            match cmd
                .clone()
                .no_binary_name(true)
                .try_get_matches_from([flag.as_str()])
            {
                Ok(_) => {}
                Err(e) if e.kind() == clap::error::ErrorKind::MissingRequiredArgument => {}
                Err(e) => return Err(at(first_line(&e.to_string()))),
            }
            out.push(flag.into());
        }
    }
    Ok((out, ids))
}

/// A value as its flag's argument: strings as they are, numbers and booleans in their text.
fn scalar(v: &DeValue<'_>) -> Option<String> {
    Some(match v {
        DeValue::String(s) => s.to_string(),
        DeValue::Integer(i) if i.radix() == 10 => i.as_str().to_owned(),
        DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix()).ok()?.to_string(),
        DeValue::Float(f) => f.as_str().to_owned(),
        DeValue::Boolean(b) => b.to_string(),
        DeValue::Datetime(d) => d.to_string(),
        DeValue::Array(_) | DeValue::Table(_) => return None,
    })
}

/// clap's error, without its `error: ` prefix and usage lines.
fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("error: ")
        .to_owned()
}

/// The settings in effect as a configuration file: each key with its value and where it came from;
/// defaults and those left unset commented out.
fn print(
    cmd: &Command,
    m: &ArgMatches,
    file: Option<&Path>,
    from_file: &[String],
    daemon: &Daemon,
) -> String {
    let mut out = format!(
        "# longhaul {}: the settings in effect ({}).\n",
        daemon.path.join(" "),
        file.map_or_else(
            || format!("no file; {CONFIG_DIR}/{}.toml does not exist", daemon.name),
            |f| format!("file {}", f.display())
        )
    );
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if NOT_SETTINGS.contains(&long) {
            continue;
        }
        let id = arg.get_id().as_str();
        let source = match m.value_source(id) {
            Some(ValueSource::DefaultValue) => "default",
            Some(ValueSource::EnvVariable) => "environment",
            Some(ValueSource::CommandLine) if from_file.iter().any(|f| f == id) => "file",
            Some(ValueSource::CommandLine) => "command line",
            _ => "unset",
        };
        // A hidden flag (for tests and experts) is shown only when something set it.
        if arg.is_hide_set() && matches!(source, "default" | "unset") {
            continue;
        }
        let raw: Vec<String> = m
            .get_raw(id)
            .map(|vs| vs.map(|v| v.to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let secret = arg.is_hide_env_values_set() || long == "database";
        let value = match raw.as_slice() {
            [] => {
                out.push_str(&format!("# {long} =\n"));
                continue;
            }
            _ if secret => toml_string(&redact(&raw.join(","))),
            [one] if matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse) => {
                one.clone()
            }
            [one] if !matches!(arg.get_action(), ArgAction::Append) => toml_value(one),
            many => format!(
                "[{}]",
                many.iter()
                    .map(|v| toml_value(v))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        // Defaults are shown commented out: read back, the file sets what was set, no more.
        let comment = if source == "default" { "# " } else { "" };
        out.push_str(&format!("{comment}{long} = {value}  # {source}\n"));
    }
    out
}

/// The names of the daemons' files (`/etc/longhaul/NAME.toml`).
pub(crate) fn daemon_names() -> impl Iterator<Item = &'static str> {
    DAEMONS.iter().map(|d| d.name)
}

/// An example file for the daemon `name` (the package's /etc/longhaul/NAME.toml): every setting,
/// each with its flag's help above it and commented out at its default, so the file changes
/// nothing until a line is uncommented, and cannot drift from the flags.
pub(crate) fn example(cli: &Command, name: &str) -> Option<String> {
    let daemon = DAEMONS.iter().find(|d| d.name == name)?;
    let mut cmd = cli.clone();
    cmd.build();
    for part in daemon.path {
        cmd = cmd.find_subcommand(part)?.clone();
    }
    let command = format!("longhaul {}", daemon.path.join(" "));
    let mut out = format!(
        "# {CONFIG_DIR}/{name}.toml: the settings of `{command}` (unit longhaul-{name}.service).\n\
         # Every long flag is a key (`man longhaul-{}`); the command line wins over this file.\n\
         # Each setting is shown commented out at its default: uncomment a line to change it.\n\
         # `{command} --print-config` shows what is in effect. More: /usr/share/doc/longhaul/docs/config.md\n",
        daemon.path.join("-")
    );
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if NOT_SETTINGS.contains(&long) || arg.is_hide_set() {
            continue;
        }
        out.push('\n');
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        for line in wrap(&help, 96) {
            out.push_str(&format!("# {line}\n"));
        }
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let value = match (defaults.as_slice(), arg.get_action()) {
            ([], ArgAction::SetTrue) => "false".to_owned(),
            ([], ArgAction::Append) => "[]".to_owned(),
            ([], _) => {
                let shown = arg
                    .get_value_names()
                    .and_then(|n| n.first())
                    .map_or_else(|| long.to_uppercase(), |n| n.to_string());
                toml_string(&shown)
            }
            ([one], ArgAction::SetTrue | ArgAction::SetFalse) => one.clone(),
            ([one], _) => toml_value(one),
            (many, _) => format!(
                "[{}]",
                many.iter()
                    .map(|v| toml_value(v))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let unset = if defaults.is_empty() && !matches!(arg.get_action(), ArgAction::SetTrue) {
            "  # unset by default"
        } else {
            ""
        };
        out.push_str(&format!("#{long} = {value}{unset}\n"));
    }
    Some(out)
}

/// `text` as lines of at most `width` characters, broken between words.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for paragraph in text.lines() {
        let mut line = String::new();
        for word in paragraph.split_whitespace() {
            if !line.is_empty() && line.len() + 1 + word.len() > width {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        lines.push(line);
    }
    lines
}

/// A value printed for TOML: a whole number as an integer, anything else as a string.
fn toml_value(v: &str) -> String {
    if !v.is_empty() && v.len() < 19 && v.bytes().all(|b| b.is_ascii_digit()) && !v.starts_with('0')
        || v == "0"
    {
        v.to_owned()
    } else {
        toml_string(v)
    }
}

fn toml_string(v: &str) -> String {
    toml::Value::String(v.to_owned()).to_string()
}

/// A URL with its password shown as `***`.
fn redact(url: &str) -> String {
    longhaul_web::redact(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn file_flags_go_after_the_subcommand_and_before_the_command_line() {
        let out = insert_after(
            os(&["longhaul", "testbed", "serve", "--log", "warn"]),
            &["testbed", "serve"],
            os(&["--listen=0.0.0.0:7068"]),
        );
        assert_eq!(
            out,
            os(&[
                "longhaul",
                "testbed",
                "serve",
                "--listen=0.0.0.0:7068",
                "--log",
                "warn"
            ])
        );
    }

    #[test]
    fn printed_values_read_back_as_the_same_arguments() {
        assert_eq!(toml_value("5201"), "5201");
        assert_eq!(toml_value("0"), "0");
        assert_eq!(toml_value("0755"), "\"0755\"");
        assert_eq!(toml_value("1G"), "\"1G\"");
        assert_eq!(toml_value("a \"b\""), r#"'a "b"'"#);
        assert_eq!(
            toml_value("99999999999999999999"),
            "\"99999999999999999999\""
        );
    }

    #[test]
    fn lines_count_from_one() {
        assert_eq!(line_of("a = 1\nb = 2\n", 0), 1);
        assert_eq!(line_of("a = 1\nb = 2\n", 6), 2);
    }
}
