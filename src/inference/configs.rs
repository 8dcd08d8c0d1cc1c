//! The configurations the inference exercise runs, and the CPU reference each is compared with.

/// Which model a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Model {
    Dense,
    Moe,
}

impl Model {
    pub fn as_str(self) -> &'static str {
        match self {
            Model::Dense => "dense",
            Model::Moe => "moe",
        }
    }
}

/// The KV cache type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kv {
    F16,
    Q8_0,
    Q4_0,
}

impl Kv {
    pub fn as_str(self) -> &'static str {
        match self {
            Kv::F16 => "f16",
            Kv::Q8_0 => "q8_0",
            Kv::Q4_0 => "q4_0",
        }
    }
}

/// What a reference run computes: a GPU configuration is compared with the CPU doing the same
/// arithmetic (the same KV type, flash attention or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reference {
    pub model: Model,
    pub kv: Kv,
    pub fa: bool,
}

impl Reference {
    pub fn name(&self) -> String {
        format!(
            "cpu-reference {} kv-{} fa-{}",
            self.model.as_str(),
            self.kv.as_str(),
            if self.fa { "on" } else { "off" }
        )
    }
    /// The arguments shared by the reference and the configurations compared with it.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec!["-fa".to_string(), if self.fa { "on" } else { "off" }.into()];
        if self.kv != Kv::F16 {
            a.extend([
                "-ctk".into(),
                self.kv.as_str().into(),
                "-ctv".into(),
                self.kv.as_str().into(),
            ]);
        }
        a
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub name: String,
    /// A short key people filter with (`--configs`): `base`, `fa`, `kv-q8_0`, `kv-q4_0`,
    /// `graphs-off`, `moe`, `moe-ncmoe`, `split-layer`, `split-row`.
    pub key: &'static str,
    pub devices: Vec<String>,
    pub reference: Reference,
    /// Arguments beyond the reference's.
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Flags (as `--help` spells them) the build must know for this to run.
    pub needs: Vec<&'static str>,
    /// What a failure tells people to avoid.
    pub avoid: String,
}

pub const KEYS: [&str; 9] = [
    "base",
    "fa",
    "kv-q8_0",
    "kv-q4_0",
    "graphs-off",
    "moe",
    "moe-ncmoe",
    "split-layer",
    "split-row",
];

/// Every configuration for `devices` (llama.cpp device names), restricted to `keys` when given.
pub fn all(devices: &[String], keys: Option<&[String]>) -> Vec<Config> {
    let wanted = |k: &str| keys.is_none_or(|ks| ks.iter().any(|x| x == k));
    let mut out = Vec::new();
    let r = |model, kv, fa| Reference { model, kv, fa };
    for d in devices {
        let dev = |extra: &[&str]| {
            let mut a = vec!["-dev".to_string(), d.clone(), "-ngl".into(), "999".into()];
            a.extend(extra.iter().map(|s| s.to_string()));
            a
        };
        let mut push = |key: &'static str,
                        what: &str,
                        reference: Reference,
                        args: Vec<String>,
                        env: Vec<(String, String)>,
                        needs: Vec<&'static str>,
                        avoid: String| {
            if wanted(key) {
                out.push(Config {
                    name: format!("{d} {what}"),
                    key,
                    devices: vec![d.clone()],
                    reference,
                    args,
                    env,
                    needs,
                    avoid,
                });
            }
        };
        push(
            "base",
            "fa-off kv-f16",
            r(Model::Dense, Kv::F16, false),
            dev(&[]),
            vec![],
            vec!["--device", "--flash-attn"],
            format!("this build on {d} (every configuration of it differs from the CPU)"),
        );
        push(
            "fa",
            "fa-on kv-f16",
            r(Model::Dense, Kv::F16, true),
            dev(&[]),
            vec![],
            vec!["--device", "--flash-attn"],
            format!("flash attention on {d} (-fa off)"),
        );
        for (key, kv) in [("kv-q8_0", Kv::Q8_0), ("kv-q4_0", Kv::Q4_0)] {
            push(
                key,
                &format!("fa-on kv-{}", kv.as_str()),
                r(Model::Dense, kv, true),
                dev(&[]),
                vec![],
                vec!["--device", "--flash-attn", "--cache-type-k"],
                format!(
                    "a {} KV cache on {d} (-ctk {} -ctv {})",
                    kv.as_str(),
                    kv.as_str(),
                    kv.as_str()
                ),
            );
        }
        push(
            "graphs-off",
            "fa-on kv-f16 graphs-off",
            r(Model::Dense, Kv::F16, true),
            dev(&[]),
            vec![("GGML_CUDA_DISABLE_GRAPHS".into(), "1".into())],
            vec!["--device", "--flash-attn"],
            format!("this build on {d}: it differs from the CPU with graphs off too"),
        );
        push(
            "moe",
            "moe fa-on",
            r(Model::Moe, Kv::F16, true),
            dev(&[]),
            vec![],
            vec!["--device", "--flash-attn"],
            format!("mixture-of-experts models on {d}"),
        );
        push(
            "moe-ncmoe",
            "moe fa-on n-cpu-moe 2",
            r(Model::Moe, Kv::F16, true),
            dev(&["-ncmoe", "2"]),
            vec![],
            vec!["--device", "--flash-attn", "--n-cpu-moe"],
            format!("keeping some experts on the CPU with {d} (--n-cpu-moe / -ncmoe)"),
        );
    }
    if devices.len() >= 2 {
        let all = devices.join(",");
        for (key, mode) in [("split-layer", "layer"), ("split-row", "row")] {
            if wanted(key) {
                out.push(Config {
                    name: format!("{all} -sm {mode} fa-on"),
                    key,
                    devices: devices.to_vec(),
                    reference: r(Model::Dense, Kv::F16, true),
                    args: vec![
                        "-dev".into(),
                        all.clone(),
                        "-ngl".into(),
                        "999".into(),
                        "-sm".into(),
                        mode.into(),
                    ],
                    env: vec![],
                    needs: vec!["--device", "--flash-attn", "--split-mode"],
                    avoid: format!("-sm {mode} across {all}"),
                });
            }
        }
    }
    out
}

/// Flags of `needs` that `help` (the program's `--help` output) does not list.
pub fn missing<'a>(needs: &[&'a str], help: &str) -> Vec<&'a str> {
    needs
        .iter()
        .filter(|f| {
            !help
                .split(|c: char| c.is_whitespace() || c == ',')
                .any(|w| w == **f)
        })
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_gpu_gets_no_split_and_two_get_both() {
        let one = all(&["CUDA0".into()], None);
        assert_eq!(one.len(), 7);
        assert!(one.iter().all(|c| !c.key.starts_with("split")));
        let two = all(&["CUDA0".into(), "CUDA1".into()], None);
        assert_eq!(two.len(), 16);
        let row = two.iter().find(|c| c.key == "split-row").expect("row");
        assert!(row.args.windows(2).any(|w| w[0] == "-sm" && w[1] == "row"));
        assert!(row.args.contains(&"CUDA0,CUDA1".to_string()));
        let only = all(&["CUDA0".into()], Some(&["kv-q8_0".to_string()]));
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].reference.kv, Kv::Q8_0);
    }

    #[test]
    fn flags_the_help_lacks_are_named() {
        let help = "-dev, --device <dev1,dev2,..>\n-fa, --flash-attn [on|off|auto]\n";
        assert!(missing(&["--device", "--flash-attn"], help).is_empty());
        assert_eq!(missing(&["--n-cpu-moe"], help), vec!["--n-cpu-moe"]);
    }
}
