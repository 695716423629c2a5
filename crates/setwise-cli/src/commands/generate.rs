//! `setwise completions SHELL` and `setwise man DIR`: shell completions and man pages
//! generated from the CLI's own definition (clap), so they cannot drift from its flags.
//! The pages in `docs/man/` are this command's output, and a test checks they still are.

use crate::Failure;
use clap::Args;
use clap_complete::Shell;
use std::path::PathBuf;

/// `setwise completions`.
#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell. The script goes to stdout, e.g.
    /// `setwise completions bash > ~/.local/share/bash-completion/completions/setwise`.
    shell: Shell,
}

/// `setwise man`.
#[derive(Args)]
pub struct ManArgs {
    /// The directory to write the pages into (created if missing): setwise.1 and one
    /// page per subcommand, named by its path (setwise-stage-run.1, …).
    dir: PathBuf,
}

/// Writes the completion script for `a.shell` of `cli` to stdout; a reader that stops
/// early (`| head`) ends it quietly.
pub fn run_completions(a: CompletionsArgs, mut cli: clap::Command) -> Result<(), Failure> {
    let name = cli.get_name().to_string();
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cli, name, &mut script);
    match std::io::Write::write_all(&mut std::io::stdout().lock(), &script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure::usage(anyhow::anyhow!("writing the completions: {e}")))
        }
        _ => Ok(()),
    }
}

/// Writes the man pages of `cli` and of each of its subcommands into `a.dir`.
pub fn run_man(a: ManArgs, cli: clap::Command) -> Result<(), Failure> {
    let fail = |e: std::io::Error| Failure::usage(anyhow::anyhow!("{}: {e}", a.dir.display()));
    std::fs::create_dir_all(&a.dir).map_err(fail)?;
    clap_mangen::generate_to(cli, &a.dir).map_err(fail)?;
    eprintln!("man pages written to {}", a.dir.display());
    Ok(())
}
