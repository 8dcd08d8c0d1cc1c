use clap::Parser;

fn main() {
    let cli = gpuprobe::cli::Cli::parse();
    let is_child = matches!(cli.command, gpuprobe::cli::Command::Child(_));
    if !is_child {
        // Descendants that leave their process group become ours, and are ended below.
        gpuprobe::process::adopt_orphans();
    }
    let code = match gpuprobe::commands::run(cli) {
        Ok(code) => code,
        Err(e) => match e.downcast_ref::<gpuprobe::Error>() {
            Some(gpuprobe::Error::StdoutClosed) => {
                gpuprobe::process::kill_adopted();
                die_of_sigpipe();
            }
            known => {
                let code = known.map_or(gpuprobe::error::exit::ENVIRONMENT, |e| e.exit_code());
                gpuprobe::commands::eprint(&format!("gpuprobe: error: {e:#}\n"));
                code
            }
        },
    };
    if !is_child {
        gpuprobe::process::kill_adopted();
    }
    std::process::exit(code);
}

/// Ends the way a Unix tool ends when its reader goes away (`gpuprobe ... | head`): quietly, by
/// SIGPIPE (status 141 in the shell). Rust ignores SIGPIPE, so restore it and raise it.
fn die_of_sigpipe() -> ! {
    #[cfg(unix)]
    // SAFETY: plain syscalls on this process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(128 + 13)
}
