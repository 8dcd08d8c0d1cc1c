//! Running the inference exercise: models, CPU references, noise, configurations, memory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::configs::{self, Config, Kv, Model, Reference};
use super::memory::Sampler;
use super::model::{self, Shape};
use super::process::{self, Ran};
use super::{
    BuildInfo, DeviceInfo, Inference, MemoryResult, ModelInfo, Outcome, RunResult, SCHEMA,
    Thresholds, kld,
};
use crate::check_build::signatures::SignatureTable;
use crate::error::{Error, Result};

/// The build's programs.
#[derive(Debug, Clone)]
pub struct Programs {
    pub dir: PathBuf,
    pub perplexity: PathBuf,
}

fn exe(name: &str) -> String {
    if cfg!(windows) {
        format!("{name}.exe")
    } else {
        name.to_string()
    }
}

/// Finds llama-perplexity: in a build folder's `bin/` (or the folder itself), or next to a
/// program of the build.
pub fn locate(binary: Option<&Path>, build_dir: Option<&Path>) -> Result<Programs> {
    let name = exe("llama-perplexity");
    let (input, dirs): (String, Vec<PathBuf>) = match (binary, build_dir) {
        (Some(b), _) => (
            format!("--binary {}", b.display()),
            vec![b.parent().map(Path::to_path_buf).unwrap_or_default()],
        ),
        (None, Some(d)) => (
            format!("--build-dir {}", d.display()),
            vec![d.join("bin"), d.to_path_buf()],
        ),
        (None, None) => {
            return Err(Error::input(
                "check-build --exercise inference",
                "no build to exercise",
                "pass --build-dir BUILD (its bin/ holds llama-perplexity)",
            ));
        }
    };
    match dirs.iter().find(|d| d.join(&name).is_file()) {
        Some(d) => Ok(Programs {
            dir: d.clone(),
            perplexity: d.join(&name),
        }),
        None => Err(Error::input(
            input,
            format!(
                "no {name} there (looked in {})",
                dirs.iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "build it: `cmake --build BUILD --target llama-perplexity`, then pass --build-dir BUILD",
        )),
    }
}

/// What the build folder's `CMakeCache.txt` says of the VMM pool for `backend` (`cuda`, `hip`):
/// compiled in (`GGML_CUDA_NO_VMM` / `GGML_HIP_NO_VMM` OFF) or out (ON). `None` when the cache
/// is not there or does not name the option (a build older than the option, or another
/// backend).
pub fn vmm_from_cache(programs_dir: &Path, backend: &str) -> Option<bool> {
    let option = match backend {
        "cuda" => "GGML_CUDA_NO_VMM",
        "hip" => "GGML_HIP_NO_VMM",
        _ => return None,
    };
    // The programs live in BUILD/bin; the cache in BUILD.
    let cache = [
        programs_dir.join("CMakeCache.txt"),
        programs_dir.parent()?.join("CMakeCache.txt"),
    ]
    .into_iter()
    .find(|p| p.is_file())?;
    let bytes = crate::files::read_bytes(&cache, 8 << 20).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    cache_bool(&text, option).map(|no_vmm| !no_vmm)
}

/// A BOOL entry of a CMake cache (`NAME:BOOL=ON`), read as CMake reads truth.
fn cache_bool(text: &str, name: &str) -> Option<bool> {
    text.lines().find_map(|l| {
        let (key, value) = l.split_once('=')?;
        let (k, _ty) = key.split_once(':')?;
        (k == name).then(|| {
            matches!(
                value.trim().to_ascii_uppercase().as_str(),
                "ON" | "1" | "TRUE" | "YES" | "Y"
            )
        })
    })
}

/// Which model to run.
#[derive(Debug, Clone)]
pub enum ModelSource {
    /// Written by gpuprobe, of about this many MiB (dense; the MoE model is the same size).
    Synthetic { mib: u64 },
    /// The user's GGUF (dense configurations only).
    User(PathBuf),
}

pub struct Plan<'a> {
    pub programs: Programs,
    /// llama.cpp device names (`CUDA0`), with what the probe knew.
    pub devices: Vec<DeviceInfo>,
    /// `cuda`, `hip`, `cpu`.
    pub backend: String,
    pub vmm: Option<bool>,
    pub llama_build: Option<u64>,
    pub runtime_version: Option<String>,
    pub model: ModelSource,
    /// Where models, text and logits go.
    pub work_dir: PathBuf,
    /// Configuration keys to run (`None`: all).
    pub keys: Option<Vec<String>>,
    /// Context of the KL-divergence runs, and their chunk count.
    pub ctx: u32,
    pub chunks: u32,
    /// Context of the memory run (0: none), run over `memory_passes` chunks.
    pub memory_ctx: u32,
    pub memory_passes: u32,
    pub sampler: Option<&'a dyn Sampler>,
    pub sample_every: Duration,
    pub timeout: Duration,
    /// No run starts after this much time; the rest are `not-run`.
    pub budget: Duration,
    pub kernel_log: Option<PathBuf>,
    pub signatures: &'a SignatureTable,
    /// Progress on stderr.
    pub verbose: bool,
}

/// Environment that hides every GPU from a CPU reference run (with `-dev none` as well: a
/// `-ngl 0` run still offloads large operations to a GPU it sees).
pub fn hide_gpus() -> Vec<(String, String)> {
    [
        "CUDA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
    ]
    .iter()
    .map(|k| (k.to_string(), "-1".to_string()))
    .collect()
}

fn cpu_args() -> Vec<String> {
    ["-dev", "none", "-ngl", "0"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

struct Runner<'a> {
    plan: &'a Plan<'a>,
    started: Instant,
}

impl Runner<'_> {
    fn out_of_time(&self) -> bool {
        self.started.elapsed() > self.plan.budget
    }
    fn say(&self, what: &str) {
        if self.plan.verbose {
            eprintln!(
                "gpuprobe: [{:>5.1} s] {what}",
                self.started.elapsed().as_secs_f64()
            );
        }
    }
    /// Runs llama-perplexity with `args`, reading the kernel log before and after.
    fn perplexity(
        &self,
        args: &[String],
        env: &[(String, String)],
        sampler: Option<(&dyn Sampler, Duration)>,
        marks: &[&str],
    ) -> (Ran, std::result::Result<Vec<String>, String>) {
        let before = self
            .plan
            .kernel_log
            .as_deref()
            .map(crate::check_build::exercise::read_kernel_log);
        let ran = process::run(
            &self.plan.programs.perplexity,
            args,
            env,
            self.plan.timeout,
            sampler,
            marks,
        );
        let after = self
            .plan
            .kernel_log
            .as_deref()
            .map(crate::check_build::exercise::read_kernel_log);
        let faults = match (before, after) {
            (Some(Ok(b)), Some(Ok(a))) => Ok(crate::check_build::exercise::new_faults(
                &b,
                &a,
                self.plan.signatures,
            )),
            (Some(Err(e)), _) | (_, Some(Err(e))) => Err(e),
            _ => Err("no kernel log program (dmesg) found".into()),
        };
        (ran, faults)
    }
}

impl Runner<'_> {
    /// A `--kl-divergence` run whose summary is read. A run that exited 0 without its summary
    /// runs once more: llama.cpp's logger leaks its worker thread's queue at exit
    /// (ggml-org/llama.cpp#22142, `common_log_main` in common/log.cpp), so on a busy machine the
    /// last lines, the summary among them, can be lost though the run itself was sound. The
    /// returned note says when that happened.
    fn divergence_run(
        &self,
        what: &str,
        args: &[String],
        env: &[(String, String)],
    ) -> (
        Ran,
        std::result::Result<Vec<String>, String>,
        Option<String>,
    ) {
        let (ran, faults) = self.perplexity(args, env, None, &[]);
        if !ran.ok() || kld::parse(&ran.output).is_some() {
            return (ran, faults, None);
        }
        self.say(&format!(
            "{what}: exited 0 without its summary; running it again"
        ));
        let first_last = ran.last_line().unwrap_or_else(|| "(none)".into());
        let (again, more) = self.perplexity(args, env, None, &[]);
        let faults = match (faults, more) {
            (Ok(mut a), Ok(b)) => {
                a.extend(b);
                Ok(a)
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        let note = format!(
            "ran twice: the first run exited 0 but its output stopped before the summary (last \
             line: {first_last}); llama.cpp can lose its last log lines at exit \
             (ggml-org/llama.cpp#22142)"
        );
        (again, faults, Some(note))
    }
}

fn result(
    name: String,
    devices: Vec<String>,
    args: &[String],
    env: &[(String, String)],
) -> RunResult {
    RunResult {
        name,
        devices,
        args: args.to_vec(),
        env: env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        reference: None,
        outcome: Outcome::NotRun,
        divergence: None,
        perplexity: None,
        elapsed_ms: 0,
        last_line: None,
        kernel_faults: Vec::new(),
        reason: String::new(),
        avoid: None,
    }
}

/// Appends `note` to the reason `r` gives.
fn add_note(r: &mut RunResult, note: Option<String>) {
    if let Some(n) = note {
        r.reason = if r.reason.is_empty() {
            n
        } else {
            format!("{}; {n}", r.reason)
        };
    }
}

/// Fills `r` from how `ran` ended; `Some(())` when it exited 0.
fn ended(r: &mut RunResult, ran: &Ran, faults: std::result::Result<Vec<String>, String>) -> bool {
    r.elapsed_ms = ran.elapsed_ms;
    r.last_line = ran.last_line();
    let ok = ran.ok();
    if ran.timed_out {
        r.outcome = Outcome::Hang;
        r.reason = format!(
            "{}; last line: {}",
            ran.status,
            r.last_line.clone().unwrap_or_else(|| "(none)".into())
        );
    } else if ran.signal.is_some() {
        r.outcome = Outcome::Crash;
        r.reason = format!(
            "{}; last line: {}",
            ran.status,
            r.last_line.clone().unwrap_or_default()
        );
    } else if !ok {
        r.outcome = Outcome::Error;
        r.reason = format!(
            "{}; last line: {}",
            ran.status,
            r.last_line.clone().unwrap_or_default()
        );
    }
    match faults {
        Ok(f) => {
            if !f.is_empty() {
                r.reason = format!(
                    "{}{}the kernel logged {} GPU fault line(s) during the run",
                    r.reason,
                    if r.reason.is_empty() { "" } else { "; " },
                    f.len()
                );
            }
            r.kernel_faults = f;
        }
        Err(e) => {
            if r.outcome.is_failure() {
                r.reason
                    .push_str(&format!("; kernel log not readable ({e})"));
            }
        }
    }
    ok
}

/// Runs the whole exercise.
pub fn run(plan: &Plan<'_>) -> Result<Inference> {
    let runner = Runner {
        plan,
        started: Instant::now(),
    };
    std::fs::create_dir_all(&plan.work_dir).map_err(|e| {
        Error::input(
            plan.work_dir.display().to_string(),
            format!("cannot create the work folder: {e}"),
            "pass --work-dir DIR on a writable disk with room for the models",
        )
    })?;
    let names: Vec<String> = plan.devices.iter().map(|d| d.device.clone()).collect();
    let mut wanted = configs::all(&names, plan.keys.as_deref());
    let mut models: HashMap<Model, PathBuf> = HashMap::new();
    let mut infos = Vec::new();
    match &plan.model {
        ModelSource::Synthetic { mib } => {
            let mut kinds = vec![Model::Dense];
            if wanted.iter().any(|c| c.reference.model == Model::Moe) {
                kinds.push(Model::Moe);
            }
            for kind in kinds {
                let shape = match kind {
                    Model::Dense => Shape::dense(*mib),
                    Model::Moe => Shape::moe(*mib),
                };
                let path = plan
                    .work_dir
                    .join(format!("synthetic-{}.gguf", kind.as_str()));
                runner.say(&format!("writing the synthetic {} model...", kind.as_str()));
                let w = model::writer(&shape);
                w.write(&path)?;
                let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                infos.push(ModelInfo {
                    kind: kind.as_str().into(),
                    source: "synthetic".into(),
                    bytes,
                    n_embd: Some(shape.n_embd),
                    n_layer: Some(shape.n_layer),
                    n_expert: Some(shape.n_expert),
                    n_vocab: Some(model::vocabulary().0.len() as u64),
                });
                models.insert(kind, path);
            }
        }
        ModelSource::User(p) => {
            let h = crate::gguf::read_header(p)?;
            let arch = h.get_str("general.architecture").unwrap_or("").to_string();
            let experts = h.get_u32(&format!("{arch}.expert_count")).unwrap_or(0);
            infos.push(ModelInfo {
                kind: "user".into(),
                source: p.display().to_string(),
                bytes: std::fs::metadata(p).map(|m| m.len()).unwrap_or(0),
                n_embd: h
                    .get_u32(&format!("{arch}.embedding_length"))
                    .map(u64::from),
                n_layer: h.get_u32(&format!("{arch}.block_count")).map(u64::from),
                n_expert: Some(u64::from(experts)),
                n_vocab: None,
            });
            models.insert(Model::Dense, p.clone());
            if experts > 0 {
                models.insert(Model::Moe, p.clone());
            }
            wanted.retain(|c| models.contains_key(&c.reference.model));
        }
    }
    let text_path = plan.work_dir.join("text.txt");
    let words = (plan.ctx as usize * plan.chunks as usize) * 5 / 4 + 64;
    crate::files::write_atomic(&text_path, model::text(words, 7).as_bytes(), "--work-dir")?;

    // What the build's llama-perplexity knows.
    let help = process::run(
        &plan.programs.perplexity,
        &["--help".to_string()],
        &[],
        Duration::from_secs(30),
        None,
        &[],
    )
    .output;

    let common = |m: &Path| -> Vec<String> {
        let mut a = vec![
            "-m".to_string(),
            m.display().to_string(),
            "-c".into(),
            plan.ctx.to_string(),
            "-b".into(),
            (plan.ctx * 4).to_string(),
            "--chunks".into(),
            plan.chunks.to_string(),
            "--seed".into(),
            "1".into(),
        ];
        // The same thread count in every run unless a run asks otherwise.
        a.extend(["-t".into(), "4".into()]);
        a
    };

    // CPU references, one per (model, KV, flash attention) the configurations use.
    let mut refs: Vec<Reference> = Vec::new();
    for c in &wanted {
        if !refs.contains(&c.reference) {
            refs.push(c.reference);
        }
    }
    let noise_base = Reference {
        model: Model::Dense,
        kv: Kv::F16,
        fa: false,
    };
    if !refs.contains(&noise_base) {
        refs.insert(0, noise_base);
    }
    let mut references = Vec::new();
    let mut ref_files: HashMap<Reference, PathBuf> = HashMap::new();
    for r in &refs {
        let Some(model_path) = models.get(&r.model) else {
            continue;
        };
        let file = plan
            .work_dir
            .join(format!("{}.kld", r.name().replace(' ', "-")));
        let mut args = common(model_path);
        args.extend(["-f".into(), text_path.display().to_string()]);
        args.extend(["--kl-divergence-base".into(), file.display().to_string()]);
        args.extend(cpu_args());
        args.extend(r.args());
        let env = hide_gpus();
        let mut res = result(r.name(), vec!["CPU".into()], &args[2..], &env);
        if runner.out_of_time() {
            res.reason = "the time budget ran out".into();
            references.push(res);
            continue;
        }
        runner.say(&format!("running {}...", r.name()));
        let (ran, faults) = runner.perplexity(&args, &env, None, &[]);
        if ended(&mut res, &ran, faults) {
            res.perplexity = kld::perplexity(&ran.output);
            if file.is_file() {
                res.outcome = Outcome::Pass;
                ref_files.insert(*r, file);
            } else {
                res.outcome = Outcome::Error;
                res.reason = "it wrote no logits file".into();
            }
        }
        references.push(res);
    }

    // CPU against CPU: another thread count, and flash attention against none.
    let mut noise = Vec::new();
    if let (Some(base), Some(m)) = (ref_files.get(&noise_base), models.get(&Model::Dense)) {
        for (what, extra) in [
            ("cpu-noise threads", vec!["-fa", "off", "-t", "1"]),
            ("cpu-noise fa-on", vec!["-fa", "on"]),
        ] {
            let mut args = common(m);
            args.extend(["--kl-divergence-base".into(), base.display().to_string()]);
            args.push("--kl-divergence".into());
            args.extend(cpu_args());
            args.extend(extra.iter().map(|s| s.to_string()));
            let env = hide_gpus();
            let mut res = result(what.into(), vec!["CPU".into()], &args[2..], &env);
            res.reference = Some(noise_base.name());
            if runner.out_of_time() {
                res.reason = "the time budget ran out".into();
                references.push(res);
                continue;
            }
            runner.say(&format!("running {what}..."));
            let (ran, faults, retried) = runner.divergence_run(what, &args, &env);
            if ended(&mut res, &ran, faults) {
                match kld::parse(&ran.output) {
                    Some(d) => {
                        res.outcome = Outcome::Pass;
                        res.divergence = Some(d);
                        noise.push(d);
                    }
                    None => {
                        res.outcome = Outcome::Error;
                        res.reason = "it printed no KL divergence summary".into();
                    }
                }
            }
            add_note(&mut res, retried);
            references.push(res);
        }
    }
    let thresholds = Thresholds::derive(&noise);

    let mut results = Vec::new();
    for c in &wanted {
        results.push(run_config(
            &runner,
            c,
            &models,
            &ref_files,
            &help,
            &thresholds,
            &common,
        ));
    }

    let memory = if plan.memory_ctx > 0 {
        Some(run_memory(&runner, &models, &help, &common))
    } else {
        None
    };
    let memory = memory.flatten();

    let mut findings = Vec::new();
    for r in &results {
        if r.outcome.is_failure()
            && let Some(avoid) = &r.avoid
        {
            let nums = r
                .divergence
                .map(|d| {
                    format!(
                        "mean KLD {:.6} (limit {:.6}), max {:.4}, same top token {:.2}% (limit {:.2}%)",
                        d.mean_kld,
                        thresholds.max_mean_kld,
                        d.max_kld,
                        d.same_top_percent,
                        thresholds.min_same_top_percent
                    )
                })
                .unwrap_or_else(|| r.reason.clone());
            findings.push(format!(
                "{}: {} against the CPU: {nums}; avoid {avoid}",
                r.name,
                r.outcome.as_str()
            ));
        }
    }
    for r in &references {
        if r.outcome.is_failure() {
            findings.push(format!(
                "{}: the CPU run itself {} ({}); the configurations that need it were not judged",
                r.name,
                r.outcome.as_str(),
                r.reason
            ));
        }
    }
    if let Some(m) = &memory
        && let Some(s) = &m.summary
        && s.keeps_growing
    {
        findings.push(format!(
            "{}: memory kept growing after the first pass over a {}-token context ({:.0} MiB at its end, {:.0} MiB peak): a long session with flash attention and a q8_0 KV cache can run out of memory on this build",
            m.run.name, m.context, s.first_pass_peak_mib, s.peak_mib
        ));
    } else if let Some(m) = &memory
        && let Some(s) = &m.summary
        && s.hoards
    {
        findings.push(format!(
            "{}: the memory pool kept {:.0} MiB over a {}-token context ({:.0} MiB before computing, {:.0} MiB peak), where reusing memory needs about {:.0} MiB for flash attention's f16 copy of a quantized KV cache: this build's pool keeps every size it allocated, so long contexts with flash attention and a quantized KV cache can run out of memory; a build with the VMM pool, or llama.cpp 9489 or later, does not keep them",
            m.run.name,
            s.pool_growth_mib.unwrap_or(0.0),
            m.context,
            s.before_compute_mib.unwrap_or(0.0),
            s.peak_mib,
            s.fa_scratch_mib.unwrap_or(0.0)
        ));
    }

    Ok(Inference {
        schema: SCHEMA.into(),
        gpuprobe_version: env!("CARGO_PKG_VERSION").into(),
        host: crate::probe::host(),
        build: BuildInfo {
            dir: plan.programs.dir.display().to_string(),
            build: plan.llama_build,
            backend: plan.backend.clone(),
            vmm: plan.vmm,
            devices: plan.devices.clone(),
        },
        runtime_version: plan.runtime_version.clone(),
        models: infos,
        thresholds,
        references,
        configurations: results,
        memory,
        findings,
        elapsed_ms: runner.started.elapsed().as_millis() as u64,
    })
}

fn run_config(
    runner: &Runner<'_>,
    c: &Config,
    models: &HashMap<Model, PathBuf>,
    ref_files: &HashMap<Reference, PathBuf>,
    help: &str,
    thresholds: &Thresholds,
    common: &dyn Fn(&Path) -> Vec<String>,
) -> RunResult {
    let mut args = Vec::new();
    if let Some(m) = models.get(&c.reference.model) {
        args = common(m);
    }
    args.extend(c.args.iter().cloned());
    args.extend(c.reference.args());
    let mut res = result(
        c.name.clone(),
        c.devices.clone(),
        args.get(2..).unwrap_or(&[]),
        &c.env,
    );
    res.reference = Some(c.reference.name());
    res.avoid = Some(c.avoid.clone());
    let missing = configs::missing(&c.needs, help);
    if !missing.is_empty() {
        res.outcome = Outcome::Unsupported;
        res.reason = format!(
            "not supported by this build: its llama-perplexity --help lacks {}",
            missing.join(", ")
        );
        return res;
    }
    let Some(base) = ref_files.get(&c.reference) else {
        res.reason = format!("its reference ({}) did not run", c.reference.name());
        return res;
    };
    if runner.out_of_time() {
        res.reason = "the time budget ran out".into();
        return res;
    }
    args.extend(["--kl-divergence-base".into(), base.display().to_string()]);
    args.push("--kl-divergence".into());
    runner.say(&format!("running {}...", c.name));
    let (ran, faults, retried) = runner.divergence_run(&c.name, &args, &c.env);
    if ended(&mut res, &ran, faults) {
        match kld::parse(&ran.output) {
            Some(d) => {
                res.divergence = Some(d);
                match thresholds.judge(&d) {
                    None if res.kernel_faults.is_empty() => res.outcome = Outcome::Pass,
                    None => res.outcome = Outcome::Fail,
                    Some(why) => {
                        res.outcome = Outcome::Fail;
                        res.reason = if res.reason.is_empty() {
                            why
                        } else {
                            format!("{why}; {}", res.reason)
                        };
                    }
                }
            }
            None => {
                res.outcome = Outcome::Error;
                res.reason = "it printed no KL divergence summary".into();
            }
        }
    }
    add_note(&mut res, retried);
    if runner.plan.verbose {
        eprint!("{}", super::line(&res));
    }
    res
}

/// One long-context run with flash attention and a q8_0 KV cache on the first device, its
/// memory sampled.
fn run_memory(
    runner: &Runner<'_>,
    models: &HashMap<Model, PathBuf>,
    help: &str,
    common: &dyn Fn(&Path) -> Vec<String>,
) -> Option<MemoryResult> {
    let plan = runner.plan;
    let sampler = plan.sampler?;
    let device = plan.devices.first()?;
    let m = models.get(&Model::Dense)?;
    let ctx = plan.memory_ctx;
    let passes = plan.memory_passes.max(2);
    let text = plan.work_dir.join("text-long.txt");
    let words = ctx as usize * passes as usize * 5 / 4 + 64;
    if crate::files::write_atomic(&text, model::text(words, 9).as_bytes(), "--work-dir").is_err() {
        return None;
    }
    let mut args = common(m);
    // The long context replaces the short one.
    for (flag, value) in [
        ("-c", ctx.to_string()),
        ("-b", "2048".to_string()),
        ("--chunks", passes.to_string()),
    ] {
        if let Some(i) = args.iter().position(|a| a == flag) {
            args[i + 1] = value;
        }
    }
    args.extend(["-f".into(), text.display().to_string()]);
    args.extend([
        "-dev".into(),
        device.device.clone(),
        "-ngl".into(),
        "999".into(),
        "-fa".into(),
        "on".into(),
        "-ctk".into(),
        "q8_0".into(),
        "-ctv".into(),
        "q8_0".into(),
    ]);
    let name = format!("{} memory fa-on kv-q8_0 ctx {ctx}", device.device);
    let mut res = result(name.clone(), vec![device.device.clone()], &args[2..], &[]);
    res.avoid = Some(format!(
        "long contexts with flash attention and a q8_0 KV cache on {}",
        device.device
    ));
    let missing = configs::missing(&["--device", "--flash-attn", "--cache-type-k"], help);
    let mut points = Vec::new();
    let mut summary = None;
    if !missing.is_empty() {
        res.outcome = Outcome::Unsupported;
        res.reason = format!("not supported by this build: lacks {}", missing.join(", "));
    } else if runner.out_of_time() {
        res.reason = "the time budget ran out".into();
    } else {
        runner.say(&format!("running {name} (memory sampled)..."));
        let (ran, faults) = runner.perplexity(
            &args,
            &[],
            Some((sampler, plan.sample_every)),
            &[COMPUTE_STARTS, FIRST_PASS_ENDS],
        );
        if ended(&mut res, &ran, faults) {
            res.perplexity = kld::perplexity(&ran.output);
            res.outcome = if res.kernel_faults.is_empty() {
                Outcome::Pass
            } else {
                Outcome::Fail
            };
        }
        // perplexity prints the time of a pass when the first one ends; when that line was not
        // caught, the first pass ends `passes - 1` passes before the end.
        let per_pass_ms = seconds_per_pass(&ran.output).map(|s| (s * 1000.0) as u64);
        let end = ran.samples.last().map(|s| s.t_ms).unwrap_or(0);
        let first_end = ran.marks_ms.get(1).copied().flatten().unwrap_or_else(|| {
            per_pass_ms
                .map(|p| end.saturating_sub(p * u64::from(passes - 1)))
                .unwrap_or(end / u64::from(passes))
        });
        let phases = super::memory::Phases {
            compute_start_ms: ran.marks_ms.first().copied().flatten(),
            first_pass_end_ms: first_end,
            setup_bytes: super::memory::setup_bytes(&ran.output, &device.device),
        };
        let scratch = crate::gguf::read_header(m)
            .ok()
            .and_then(|h| super::memory::fa_scratch_for(&h, ctx));
        summary = super::memory::summarise(&ran.samples, phases, scratch);
        points = ran.samples;
        if let Some(s) = &summary
            && res.outcome == Outcome::Pass
        {
            if s.keeps_growing {
                res.outcome = Outcome::Fail;
                res.reason = format!(
                    "memory grew by {:.0} MiB after the first pass",
                    s.growth_after_first_pass_mib
                );
            } else if s.hoards {
                res.outcome = Outcome::Fail;
                res.reason = format!(
                    "the memory pool took {:.0} MiB while computing, {:.1} times the {:.0} MiB flash attention needs at this context",
                    s.pool_growth_mib.unwrap_or(0.0),
                    s.pool_growth_mib.unwrap_or(0.0) / s.fa_scratch_mib.unwrap_or(1.0).max(1.0),
                    s.fa_scratch_mib.unwrap_or(0.0)
                );
            }
        }
    }
    if plan.verbose {
        eprint!("{}", super::line(&res));
    }
    Some(MemoryResult {
        run: res,
        sampler: sampler.name(),
        context: ctx,
        passes,
        points,
        summary,
    })
}

/// Printed before the first chunk is computed, after the model, KV cache and compute buffers are
/// set up (llama.cpp 4500-11434 alike).
const COMPUTE_STARTS: &str = "calculating perplexity over";
/// Printed when the first chunk ends.
const FIRST_PASS_ENDS: &str = " seconds per pass";

/// `perplexity: 1.23 seconds per pass - ETA ...`
fn seconds_per_pass(output: &str) -> Option<f64> {
    output.lines().find_map(|l| {
        let (before, _) = l.split_once(" seconds per pass")?;
        before.rsplit(' ').next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_a_build_folder_compiled_in_is_read_from_its_cache() {
        let dir = tempfile::tempdir().expect("temp dir");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("bin");
        assert_eq!(vmm_from_cache(&bin, "cuda"), None);
        std::fs::write(
            dir.path().join("CMakeCache.txt"),
            "//No VMM\nGGML_CUDA_NO_VMM:BOOL=ON\nGGML_HIP_NO_VMM:BOOL=OFF\n",
        )
        .expect("cache");
        assert_eq!(vmm_from_cache(&bin, "cuda"), Some(false));
        assert_eq!(vmm_from_cache(&bin, "hip"), Some(true));
        assert_eq!(vmm_from_cache(&bin, "cpu"), None);
    }

    #[test]
    fn the_time_of_a_pass_is_read() {
        assert_eq!(
            seconds_per_pass("perplexity: 1.25 seconds per pass - ETA 0.05 minutes"),
            Some(1.25)
        );
        assert_eq!(seconds_per_pass("nothing"), None);
    }
}
