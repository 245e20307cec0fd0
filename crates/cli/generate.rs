//! `longhaul generate man DIR`, `longhaul generate completions SHELL` and `longhaul generate config
//! NAME`: the manual pages (one per command and subcommand, from the same flag definitions as
//! `--help`), the shell completions and the daemons' example configuration files, for the Debian
//! package (packaging/deb/build.sh) and anyone who installs by hand. Hidden from `--help`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Command, Subcommand, ValueEnum};

#[derive(Args, Debug)]
pub(crate) struct GenerateArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand, Debug)]
enum What {
    /// Write a manual page per command into DIR (longhaul.1, longhaul-server.1,
    /// longhaul-testbed-serve.1, ...).
    Man {
        /// Where to write them (made if missing).
        dir: PathBuf,
    },
    /// Print an example configuration file for a daemon (/etc/longhaul/NAME.toml): every setting
    /// with its help, commented out at its default.
    Config {
        /// The daemon: server, testbed, monitor or agent.
        name: String,
    },
    /// Print the completion script for SHELL.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: Shell,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

pub(crate) fn run(a: &GenerateArgs, mut cli: Command) -> anyhow::Result<ExitCode> {
    cli.build();
    match &a.what {
        What::Man { dir } => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let mut written = Vec::new();
            pages(&cli, "", dir, &mut written)?;
            for p in &written {
                println!("{}", p.display());
            }
        }
        What::Config { name } => match crate::config::example(&cli, name) {
            Some(text) => print!("{text}"),
            None => anyhow::bail!(
                "no daemon named {name:?} (one of: {})",
                crate::config::daemon_names().collect::<Vec<_>>().join(", ")
            ),
        },
        What::Completions { shell } => {
            let shell = match shell {
                Shell::Bash => clap_complete::Shell::Bash,
                Shell::Zsh => clap_complete::Shell::Zsh,
                Shell::Fish => clap_complete::Shell::Fish,
            };
            clap_complete::generate(shell, &mut cli, "longhaul", &mut std::io::stdout());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the page of `cmd` (named `PREFIX-NAME`) and of each of its visible subcommands.
fn pages(
    cmd: &Command,
    prefix: &str,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let name = if prefix.is_empty() {
        cmd.get_name().to_owned()
    } else {
        format!("{prefix}-{}", cmd.get_name())
    };
    let path = dir.join(format!("{name}.1"));
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone().name(name.clone()))
        .render(&mut out)
        .with_context(|| format!("rendering {name}"))?;
    std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    written.push(path);
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        pages(sub, &name, dir, written)?;
    }
    Ok(())
}
