//! `gpuprobe check-build`: reads what a llama.cpp build says about itself (running the binary,
//! or from a saved log), measures this machine (or reads a report), and prints the findings.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Result;

use super::detect::probe_options;
use super::print;
use crate::check_build::binary;
use crate::check_build::corpus::Corpus;
use crate::check_build::signatures::SignatureTable;
use crate::check_build::{self, InputInfo, InputKind, Options, runner};
use crate::cli::CheckBuildArgs;
use crate::plan::Mode;
use crate::profiles::Knowledge;
use crate::report::Report;

fn read_log(path: &Path) -> Result<String, crate::Error> {
    let shown = path.display().to_string();
    let input = format!("--log {shown}");
    let mut bytes = Vec::new();
    if shown == "-" {
        let limit = crate::files::MAX_INPUT_BYTES;
        std::io::stdin().lock().take(limit + 1).read_to_end(&mut bytes).map_err(|e| crate::Error::input(&input, format!("cannot read stdin: {e}"), "pipe llama.cpp's output in, e.g. `llama-cli --version 2>&1 | gpuprobe check-build --log -`"))?;
        // Refused like a file of that size: cutting it would lose a failure after the cut.
        let over = if bytes.len() as u64 > limit {
            Err(std::io::Error::other(format!(
                "is larger than {} MiB (the limit for an input)",
                limit >> 20
            )))
        } else {
            crate::files::charge(bytes.len() as u64)
        };
        over.map_err(|e| {
            crate::Error::input(
                &input,
                format!("standard input {e}"),
                "save the log to a file and pass the part with the run that failed",
            )
        })?;
    } else {
        // A regular file, bounded (a FIFO or device is refused rather than waited on).
        bytes = crate::files::read_bytes(path, crate::files::MAX_INPUT_BYTES).map_err(|e| {
            crate::Error::input(
                &input,
                format!("cannot read: {e}"),
                "check the path; save llama.cpp's output with `llama-cli --version > out.txt 2>&1`",
            )
        })?;
    }
    let text = runner::decode(&bytes);
    if text.trim().is_empty() {
        return Err(crate::Error::input(
            &input,
            "is empty",
            "llama.cpp prints --version and its device lines to stderr: capture both streams, e.g. `llama-cli --version > out.txt 2>&1`",
        ));
    }
    Ok(text)
}

pub fn run(given: &CheckBuildArgs) -> Result<i32> {
    let resolved = inputs(given)?;
    let a = &resolved;
    if a.llama_build == Some(0) {
        return Err(crate::Error::input(
            "--llama-build",
            "build 0 is what llama.cpp reports when built without git",
            "give the real build number (the N of tag bN)",
        )
        .into());
    }
    let opts = probe_options(&a.probe)?;
    let k = Knowledge::load()?;
    let signatures = SignatureTable::bundled(&k.quirks)?;
    // Saved report first: a bad --from fails before anything runs.
    let saved: Option<Report> = match &a.from {
        Some(path) => Some(crate::report_file::read_report(path)?),
        None => None,
    };
    if let Some(mode) = a.exercise {
        return run_exercise(mode, a, &k, saved.as_ref());
    }
    let (corpus, input, examined) = gather(a, &opts)?;
    let binary::Examined {
        findings: mut extra,
        binary_dir,
        needed,
        ..
    } = examined;
    let probed: Option<Report> = if saved.is_none() && !a.no_probe {
        crate::neutral::eprintln(
            "gpuprobe: probing this machine's GPUs (skip with --no-probe, or use --from REPORT.json)...",
        );
        Some(crate::probe::detect(&opts))
    } else {
        None
    };
    let (machine, report_path) = machine_of(a, saved.as_ref(), probed.as_ref());
    // The toolkit the build's libraries reveal, against the driver measured here.
    if let Some(m) = machine.as_ref() {
        extra.extend(binary::toolkit_findings(m, &needed));
    }
    let env_set = binary::env_set_for(&k, machine.as_ref());
    let options = Options {
        knowledge: &k,
        signatures: &signatures,
        binary_dir,
        os: crate::devices::host_os(machine.as_ref().map(|m| m.report)),
        machine,
        llama_build: a.llama_build,
        env_set,
        report_path,
    };
    let report = check_build::check_corpus(&corpus, input, extra, &options);
    write_report(a, &report)?;
    Ok(report.summary.exit_code)
}

/// `--exercise ops`, `inference` or `all` (both, one after the other).
fn run_exercise(
    mode: crate::cli::ExerciseMode,
    a: &CheckBuildArgs,
    k: &Knowledge,
    saved: Option<&Report>,
) -> Result<i32> {
    match mode {
        crate::cli::ExerciseMode::Ops => exercise(a, k, saved),
        crate::cli::ExerciseMode::Inference => super::inference::run(a, k, saved),
        crate::cli::ExerciseMode::All => {
            if a.json || a.output.is_some() {
                return Err(crate::Error::input(
                    "--exercise all",
                    "--json and --output write one document, and `all` makes two",
                    "run `--exercise ops` and `--exercise inference` separately for each JSON document",
                )
                .into());
            }
            let ops = exercise(a, k, saved)?;
            let inference = super::inference::run(a, k, saved)?;
            Ok(ops.max(inference))
        }
    }
}

/// Every input in one corpus: the program's runs (examined first), then each log; every log is
/// read before anything is probed, so a bad one fails first.
fn gather(
    a: &CheckBuildArgs,
    opts: &crate::probe::ProbeOptions,
) -> Result<(Corpus, InputInfo, binary::Examined)> {
    if a.log.iter().filter(|l| l.as_os_str() == "-").count() > 1 {
        return Err(crate::Error::input(
            "--log -",
            "stdin given twice",
            "read stdin once; save the other log to a file",
        )
        .into());
    }
    let mut corpus = Corpus::default();
    let mut examined = binary::Examined::default();
    let mut paths: Vec<String> = Vec::new();
    if let Some(bin) = &a.binary {
        examined = binary::examine(bin, opts.timeout, &mut corpus)?;
        paths.push(bin.display().to_string());
    }
    for log in &a.log {
        let text = read_log(log)?;
        corpus.push(log.display().to_string(), &text);
        paths.push(log.display().to_string());
    }
    let input = InputInfo {
        kind: match (a.binary.is_some(), a.log.is_empty()) {
            (true, true) => InputKind::Binary,
            (true, false) => InputKind::BinaryAndLog,
            _ => InputKind::Log,
        },
        path: paths.join(", "),
        runs: std::mem::take(&mut examined.runs),
    };
    Ok((corpus, input, examined))
}

/// The machine judged (a saved report, else this machine's probe, else none), and the report's
/// path for the `--from` of the commands in fixes.
fn machine_of<'r>(
    a: &CheckBuildArgs,
    saved: Option<&'r Report>,
    probed: Option<&'r Report>,
) -> (Option<check_build::Machine<'r>>, Option<String>) {
    match (saved, probed) {
        (Some(r), _) => {
            let p = a
                .from
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            (
                Some(check_build::machine_from(
                    r,
                    Mode::Report,
                    format!("report {p}"),
                )),
                Some(p),
            )
        }
        (None, Some(r)) => (
            Some(check_build::machine_from(
                r,
                Mode::Probe,
                "this machine's probe",
            )),
            None,
        ),
        _ => (None, None),
    }
}

/// `--output FILE` gets the JSON document; stdout the JSON (`--json`) or the human report.
fn write_report(a: &CheckBuildArgs, report: &check_build::CheckReport) -> Result<()> {
    let json = serde_json::to_string_pretty(report)? + "\n";
    if let Some(path) = &a.output {
        write_whole(path, &json)?;
    }
    if a.json {
        super::print_json(&json)?;
    } else {
        print(&if a.verbose {
            check_build::render_verbose(report)
        } else {
            check_build::render(report)
        })?;
    }
    Ok(())
}

/// Programs of a build folder's `bin/` that print what the build is, in the order tried: the
/// ones every build since 2024 has, then the names of older eras (`main`, `server`).
const FOLDER_PROGRAMS: &[&str] = &[
    "llama-cli",
    "llama-server",
    "llama-bench",
    "llama-simple",
    "llama-perplexity",
    "main",
    "server",
];

/// The inputs as the rest of the command takes them: a positional PATH becomes --build-dir,
/// --binary or --log; a build folder without --exercise becomes its program.
fn inputs(given: &CheckBuildArgs) -> Result<CheckBuildArgs, crate::Error> {
    let mut a = given.clone();
    if let Some(path) = a.path.take() {
        let shown = path.display().to_string();
        let meta = std::fs::metadata(&path).map_err(|e| {
            crate::Error::input(
                shown.clone(),
                format!("cannot read: {e}"),
                format!("give {}", crate::cli::CHECK_BUILD_INPUTS),
            )
        })?;
        if meta.is_dir() {
            if let Some(other) = &a.build_dir {
                return Err(crate::Error::input(
                    shown,
                    format!(
                        "two build folders given (also --build-dir {})",
                        other.display()
                    ),
                    "give one build folder",
                ));
            }
            a.build_dir = Some(path);
        } else if is_program(&meta) {
            if let Some(other) = &a.binary {
                return Err(crate::Error::input(
                    shown,
                    format!("two programs given (also --binary {})", other.display()),
                    "give one program; judge another build in a second run",
                ));
            }
            a.binary = Some(path);
        } else {
            if a.exercise.is_some() {
                return Err(crate::Error::input(
                    shown,
                    "is a file that is not executable, read as a log, and --exercise runs a build",
                    "give the build folder (`gpuprobe check-build ./build --exercise`) or its test-backend-ops",
                ));
            }
            a.log.insert(0, path);
        }
    }
    if a.binary.is_none() && a.log.is_empty() && a.build_dir.is_none() {
        return Err(crate::Error::input(
            "check-build",
            "nothing to judge",
            format!("give {}", crate::cli::CHECK_BUILD_INPUTS),
        ));
    }
    if a.exercise.is_none()
        && let Some(dir) = a.build_dir.take()
    {
        if a.binary.is_some() {
            return Err(crate::Error::input(
                format!("--build-dir {}", dir.display()),
                "given with --binary: both name the program to run",
                "give the build folder or the program, not both",
            ));
        }
        a.binary = Some(program_of_folder(&dir)?);
    }
    Ok(a)
}

/// An executable file is a program to run; any other file is a log.
fn is_program(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}

/// The program of a build folder that check-build runs (`bin/llama-cli` first).
fn program_of_folder(dir: &Path) -> Result<PathBuf, crate::Error> {
    let input = format!("build folder {}", dir.display());
    let exe = |n: &str| {
        if cfg!(windows) {
            format!("{n}.exe")
        } else {
            n.to_string()
        }
    };
    let places = [dir.join("bin"), dir.to_path_buf()];
    for place in &places {
        for name in FOLDER_PROGRAMS {
            let candidate = place.join(exe(name));
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    let (message, fix) = if !dir.join("CMakeCache.txt").is_file()
        && dir.join("CMakeLists.txt").is_file()
    {
        (
            "looks like llama.cpp's source folder (CMakeLists.txt, no CMakeCache.txt), not a build folder".to_string(),
            "give the folder given to `cmake -B`, e.g. `gpuprobe check-build ./build`".to_string(),
        )
    } else {
        (
            format!(
                "holds none of {} in bin/ or at its top",
                FOLDER_PROGRAMS.join(", ")
            ),
            format!(
                "build one (`cmake --build {} --target llama-cli`), or pass the program with --binary or a saved log with --log",
                crate::neutral::sh_word(&dir.display().to_string())
            ),
        )
    };
    Err(crate::Error::input(input, message, fix))
}

/// Writes `text` to `path` whole, or not at all.
fn write_whole(path: &Path, text: &str) -> Result<(), crate::Error> {
    crate::files::write_atomic(path, text.as_bytes(), "--output")
}

/// `check-build --exercise`: run test-backend-ops on each device and judge it.
fn exercise(a: &CheckBuildArgs, k: &Knowledge, saved: Option<&Report>) -> Result<i32> {
    use crate::check_build::exercise::{self as ex, Plan};
    if !(a.exercise_timeout.is_finite()
        && a.exercise_timeout > 0.0
        && a.exercise_timeout <= 86_400.0)
    {
        return Err(crate::Error::input(
            "--exercise-timeout",
            format!("`{}` is not a usable number of seconds", a.exercise_timeout),
            "give a positive number such as 300",
        )
        .into());
    }
    let tbo = ex::locate(a.binary.as_deref(), a.build_dir.as_deref())?;
    let probed: Option<Report> = if saved.is_none() && !a.no_probe && a.devices.is_empty() {
        crate::neutral::eprintln(
            "gpuprobe: probing this machine's GPUs to find the devices to exercise...",
        );
        Some(crate::probe::detect(&probe_options(&a.probe)?))
    } else {
        None
    };
    let machine = saved.or(probed.as_ref());
    let devices = if a.devices.is_empty() {
        machine.map(ex::targets_of).unwrap_or_default()
    } else {
        a.devices
            .iter()
            .map(|d| ex::target_named(d, machine))
            .collect()
    };
    if devices.is_empty() {
        return Err(crate::Error::Environment {
            message: match machine {
                Some(_) => "no GPU to exercise: the probe found none".into(),
                None => "no device to exercise (--no-probe)".into(),
            },
            fix:
                "pass --device NAME (CUDA0, ROCm0, CPU) for each device to run test-backend-ops on"
                    .into(),
        }
        .into());
    }
    let runtime_version = machine.and_then(|m| {
        m.devices
            .iter()
            .find_map(|d| d.runtime_version.clone())
            .or_else(|| m.backends.iter().find_map(|b| b.runtime_version.clone()))
    });
    let llama_build = match a.llama_build {
        Some(n) => Some(n),
        None => binary::build_next_to(&tbo, probe_options(&a.probe)?.timeout),
    };
    let kernel_log = std::env::var_os("GPUPROBE_DMESG")
        .map(PathBuf::from)
        .or_else(|| which::which("dmesg").ok());
    let plan = Plan {
        test_backend_ops: tbo,
        devices,
        ops: a.ops.clone().unwrap_or_else(|| ex::DEFAULT_OPS.into()),
        params: a
            .params
            .clone()
            .unwrap_or_else(|| ex::DEFAULT_PARAMS.into()),
        jobs: std::thread::available_parallelism()
            .map(|n| n.get().clamp(1, 8))
            .unwrap_or(4),
        timeout: std::time::Duration::from_secs_f64(a.exercise_timeout),
        llama_build,
        runtime_version,
        kernel_log,
    };
    for t in &plan.devices {
        crate::neutral::eprintln(&format!(
            "gpuprobe: running {} test -b {} -o {} (timeout {} s)...",
            plan.test_backend_ops.display(),
            crate::check_build::text::neutralise(&t.device),
            crate::check_build::text::neutralise(&plan.ops),
            a.exercise_timeout
        ));
    }
    let result = ex::run(&plan, &SignatureTable::bundled(&k.quirks)?);
    let json = serde_json::to_string_pretty(&result)? + "\n";
    if let Some(path) = &a.output {
        write_whole(path, &json)?;
    }
    if a.json {
        super::print_json(&json)?;
    } else {
        print(&result.render())?;
    }
    Ok(result.exit_code())
}
