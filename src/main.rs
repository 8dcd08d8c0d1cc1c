use clap::Parser;

fn main() {
    let cli = match gpuprobe::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap would print the bad value as given: escape sequences and all.
            let text = e.render().to_string();
            if e.use_stderr() {
                gpuprobe::commands::eprint(&text);
            } else {
                let _ = gpuprobe::commands::print_help(&text);
            }
            std::process::exit(e.exit_code());
        }
    };
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
                gpuprobe::process::die_of_sigpipe();
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
    gpuprobe::probe::hip::discard_scratch();
    std::process::exit(code);
}
