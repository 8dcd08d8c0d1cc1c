//! The edge: turns parsed arguments into library calls, prints results, picks exit codes.

mod check_build;
mod cmake_flags;
mod detect;
mod inference;
mod prebuilt;
mod quirks;
mod workflow;

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::{Cli, Command, SchemaDocument};
use crate::schema::Document;

pub fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Detect(a) => detect::run(&a),
        Command::CmakeFlags(a) => cmake_flags::run(&a),
        Command::Prebuilt(a) => prebuilt::run(&a),
        Command::Quirks(a) => quirks::run(&a),
        Command::Workflow(a) => workflow::run(&a),
        Command::CheckBuild(a) => check_build::run(&a),
        Command::Schema { document } => {
            let doc = match document {
                SchemaDocument::Report => Document::Report,
                SchemaDocument::Plan => Document::Plan,
                SchemaDocument::CheckBuild => Document::CheckBuild,
                SchemaDocument::Exercise => Document::Exercise,
                SchemaDocument::Inference => Document::Inference,
                SchemaDocument::Prebuilt => Document::Prebuilt,
            };
            print_json(&doc.schema_text())?;
            Ok(0)
        }
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            let mut text = Vec::new();
            clap_complete::generate(shell, &mut cmd, "gpuprobe", &mut text);
            write_stdout(&text)?;
            Ok(0)
        }
        Command::Man => {
            let man = clap_mangen::Man::new(Cli::command());
            let mut text = Vec::new();
            man.render(&mut text)?;
            write_stdout(&text)?;
            Ok(0)
        }
        Command::Child(a) => Ok(crate::probe::child::run(
            a.backend.backend(),
            &crate::probe::child::Options {
                list: a.list,
                device: a.device,
                all: a.all,
                only: a.only.clone(),
                peers: a.peers,
                cycles: a.cycles,
                smoke: !a.no_smoke,
                plan: a
                    .plan
                    .as_ref()
                    .and_then(|p| Some((*p.first()?, *p.get(1)?))),
            },
        )),
    }
}

/// Writes results to stdout with every control character except newline and tab shown escaped
/// (no escape sequence from a device name, log or report reaches the terminal). A closed pipe
/// (`| head`) becomes [`crate::Error::StdoutClosed`], which ends gpuprobe quietly.
pub(crate) fn print(text: &str) -> Result<()> {
    write_stdout(crate::neutral::printed(text).as_bytes())
}

/// Help and version text, on stdout like any result (a closed pipe is not an error here).
pub fn print_help(text: &str) -> Result<()> {
    print(text)
}

/// Writes a JSON document to stdout, made print-safe by [`crate::neutral::json`] (JSON escapes
/// only, so the value read back is the value written).
pub(crate) fn print_json(doc: &str) -> Result<()> {
    write_stdout(crate::neutral::json(doc).as_bytes())
}

/// Writes workflow commands gpuprobe means the runner to act on (annotations, whose messages
/// [`crate::neutral::annotation`] has encoded), as terminal text.
pub(crate) fn print_commands(text: &str) -> Result<()> {
    write_stdout(crate::neutral::terminal(text).as_bytes())
}

fn write_stdout(bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            Err(crate::Error::StdoutClosed.into())
        }
        Err(e) => Err(crate::Error::io_on("standard output", "write", e).into()),
        Ok(()) => Ok(()),
    }
}

/// Writes a message to stderr, neutralised like [`print`]; stderr failing is not worth an error.
pub fn eprint(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr()
        .lock()
        .write_all(crate::neutral::printed(text).as_bytes());
}

/// One `gpuprobe: warning: ...` line on stderr: the user must act on it; `text` is one line.
pub(crate) fn warn(text: &str) {
    eprint(&format!(
        "gpuprobe: warning: {}\n",
        crate::neutral::inline(text)
    ));
}

/// One `gpuprobe: note: ...` line on stderr; `text` is one line (its newlines shown escaped).
pub(crate) fn note(text: &str) {
    eprint(&format!(
        "gpuprobe: note: {}\n",
        crate::neutral::inline(text)
    ));
}
