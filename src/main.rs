use clap::Parser;

fn main() {
    let cli = gpuprobe::cli::Cli::parse();
    let code = match gpuprobe::commands::run(cli) {
        Ok(code) => code,
        Err(e) => {
            let code = e
                .downcast_ref::<gpuprobe::Error>()
                .map_or(gpuprobe::error::exit::ENVIRONMENT, |e| e.exit_code());
            eprintln!("gpuprobe: error: {e:#}");
            code
        }
    };
    std::process::exit(code);
}
