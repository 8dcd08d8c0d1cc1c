//! The edge: turns parsed arguments into library calls, prints results, picks exit codes.

mod check_build;
mod cmake_flags;
mod detect;
mod quirks;
mod workflow;

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Detect(a) => detect::run(&a),
        Command::CmakeFlags(a) => cmake_flags::run(&a),
        Command::Quirks(a) => quirks::run(&a),
        Command::Workflow(a) => workflow::run(&a),
        Command::CheckBuild(a) => check_build::run(&a),
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "gpuprobe", &mut std::io::stdout());
            Ok(0)
        }
        Command::Man => {
            let man = clap_mangen::Man::new(Cli::command());
            man.render(&mut std::io::stdout())?;
            Ok(0)
        }
        Command::Child(a) => Ok(crate::probe::child::run(&a)),
    }
}

/// Writes to stdout, treating a closed pipe (`| head`) as success.
pub(crate) fn print(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
