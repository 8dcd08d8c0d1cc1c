//! The synthetic models gpuprobe writes for `check-build --exercise inference`: llama
//! architecture, seeded random f16 weights, and a small SentencePiece vocabulary that holds every
//! word of the text gpuprobe feeds them as one token (so tokenising stays fast: a byte-only
//! vocabulary turns each character into a token, and long inputs took minutes to tokenise).
//!
//! Weight scales keep activations near unit size through the residual stream and make the output
//! logits spread (a standard deviation of about 3), so the next-token distributions are far from
//! flat and a wrong computation moves the KL divergence well above the noise.

use std::path::Path;

use crate::error::Result;
use crate::gguf::write::{Fill, Rng, Tensor};
use crate::gguf::{TensorType, Value, Writer};

/// SentencePiece's word-start marker (U+2581).
const SPACE: &str = "\u{2581}";

/// The shape of a synthetic model.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub n_embd: u64,
    pub n_layer: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    pub n_ff: u64,
    /// 0: dense.
    pub n_expert: u64,
    pub n_expert_used: u64,
    pub n_ctx_train: u64,
    pub seed: u64,
}

const HEAD_DIM: u64 = 64;

impl Shape {
    /// A dense model of about `mib` MiB of f16 weights (at least the smallest shape: 4 layers of
    /// 256).
    pub fn dense(mib: u64) -> Shape {
        let n_embd = width_for(mib, 3, 1);
        Shape {
            n_embd,
            n_layer: 4,
            n_head: n_embd / HEAD_DIM,
            n_head_kv: (n_embd / HEAD_DIM / 2).max(1),
            n_ff: 3 * n_embd,
            n_expert: 0,
            n_expert_used: 0,
            n_ctx_train: 65536,
            seed: 0x6770_7570_726f_6265,
        }
    }
    /// A mixture-of-experts model (4 experts, 2 used a token) of about `mib` MiB.
    pub fn moe(mib: u64) -> Shape {
        let n_embd = width_for(mib, 1, 4);
        Shape {
            n_embd,
            n_layer: 4,
            n_head: n_embd / HEAD_DIM,
            n_head_kv: (n_embd / HEAD_DIM / 2).max(1),
            n_ff: n_embd,
            n_expert: 4,
            n_expert_used: 2,
            n_ctx_train: 65536,
            seed: 0x6d6f_655f_6d6f_6465,
        }
    }
    pub fn is_moe(&self) -> bool {
        self.n_expert > 0
    }
}

/// The width (a multiple of 256) whose 4 layers of attention (3 e² with half as many KV heads)
/// and feed-forward (3 e × ff_mult e × experts) take about `mib` MiB in f16.
fn width_for(mib: u64, ff_mult: u64, experts: u64) -> u64 {
    let per_e2 = 4 * (3 + 3 * ff_mult * experts) * 2;
    let e = ((mib.max(1) << 20) as f64 / per_e2 as f64).sqrt() as u64;
    (e / 256).clamp(1, 32) * 256
}

/// The words of the text and vocabulary: made from syllables by a seeded generator.
pub fn words() -> Vec<String> {
    const ONSETS: [&str; 12] = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t"];
    const VOWELS: [&str; 5] = ["a", "e", "i", "o", "u"];
    let mut rng = Rng::new(11);
    let mut out: Vec<String> = Vec::new();
    while out.len() < 96 {
        let syllables = 1 + (rng.next_u64() % 3) as usize;
        let w: String = (0..syllables)
            .map(|_| {
                format!(
                    "{}{}",
                    ONSETS[(rng.next_u64() % 12) as usize],
                    VOWELS[(rng.next_u64() % 5) as usize]
                )
            })
            .collect();
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// The vocabulary: `<unk>`, `<s>`, `</s>`, the 256 byte tokens, then every prefix of each
/// `▁word` of two characters or more, so SentencePiece merges reach each whole word through its
/// prefixes and nothing else.
pub fn vocabulary() -> (Vec<String>, Vec<f32>, Vec<i32>) {
    let mut tokens = vec!["<unk>".to_string(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    tokens.push(SPACE.into());
    types.push(1);
    let mut seen = std::collections::HashSet::new();
    for w in words() {
        let full: Vec<char> = format!("{SPACE}{w}").chars().collect();
        for n in 2..=full.len() {
            let piece: String = full[..n].iter().collect();
            if seen.insert(piece.clone()) {
                tokens.push(piece);
                types.push(1);
            }
        }
    }
    // Longer pieces score higher: whole words win.
    let scores = tokens
        .iter()
        .zip(&types)
        .map(|(t, ty)| {
            if *ty == 1 {
                t.chars().count() as f32
            } else {
                0.0
            }
        })
        .collect();
    (tokens, scores, types)
}

/// `n_words` words of text in short lines, the same for the same arguments.
pub fn text(n_words: usize, seed: u64) -> String {
    let words = words();
    let mut rng = Rng::new(seed);
    let mut s = String::with_capacity(n_words * 6);
    for i in 0..n_words {
        // A little structure (a word often follows from the one before) keeps the text from
        // being uniform noise.
        let idx = (rng.next_u64() % words.len() as u64) as usize;
        s.push_str(&words[idx]);
        s.push(if i % 12 == 11 { '\n' } else { ' ' });
    }
    s
}

/// The GGUF of `shape`.
pub fn writer(shape: &Shape) -> Writer {
    let (tokens, scores, types) = vocabulary();
    let n_vocab = tokens.len() as u64;
    let e = shape.n_embd;
    let kv = shape.n_head_kv * (e / shape.n_head);
    let mut w = Writer::new();
    w.kv("general.architecture", Value::Str("llama".into()))
        .kv(
            "general.name",
            Value::Str(if shape.is_moe() {
                "gpuprobe synthetic moe".into()
            } else {
                "gpuprobe synthetic dense".into()
            }),
        )
        .kv("general.file_type", Value::U32(1))
        .kv("llama.context_length", Value::U32(shape.n_ctx_train as u32))
        .kv("llama.embedding_length", Value::U32(e as u32))
        .kv("llama.block_count", Value::U32(shape.n_layer as u32))
        .kv("llama.feed_forward_length", Value::U32(shape.n_ff as u32))
        .kv(
            "llama.attention.head_count",
            Value::U32(shape.n_head as u32),
        )
        .kv(
            "llama.attention.head_count_kv",
            Value::U32(shape.n_head_kv as u32),
        )
        .kv("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5))
        .kv("llama.rope.freq_base", Value::F32(10000.0))
        .kv("llama.vocab_size", Value::U32(n_vocab as u32));
    if shape.is_moe() {
        w.kv("llama.expert_count", Value::U32(shape.n_expert as u32))
            .kv(
                "llama.expert_used_count",
                Value::U32(shape.n_expert_used as u32),
            );
    }
    w.kv("tokenizer.ggml.model", Value::Str("llama".into()))
        .kv("tokenizer.ggml.tokens", Value::ArrStr(tokens))
        .kv("tokenizer.ggml.scores", Value::ArrF32(scores))
        .kv("tokenizer.ggml.token_type", Value::ArrI32(types))
        .kv("tokenizer.ggml.bos_token_id", Value::U32(1))
        .kv("tokenizer.ggml.eos_token_id", Value::U32(2))
        .kv("tokenizer.ggml.unknown_token_id", Value::U32(0))
        .kv("tokenizer.ggml.add_bos_token", Value::Bool(true))
        .kv("tokenizer.ggml.add_eos_token", Value::Bool(false));

    let mut seed = shape.seed;
    let mut next = || {
        seed = seed.wrapping_add(0x9e37_79b9);
        seed
    };
    let unit = |fan_in: u64| (3.0 / fan_in as f32).sqrt();
    let mut t = |name: String, dims: Vec<u64>, ty: TensorType, fill: Fill| {
        w.tensor(Tensor {
            name,
            dims,
            ty,
            fill,
        });
    };
    let f16 = TensorType::F16;
    let f32 = TensorType::F32;
    t(
        "token_embd.weight".into(),
        vec![e, n_vocab],
        f16,
        Fill::Uniform {
            seed: next(),
            scale: 1.0,
        },
    );
    for i in 0..shape.n_layer {
        let b = |n: &str| format!("blk.{i}.{n}.weight");
        let norm = |s: u64| Fill::Around {
            seed: s,
            center: 1.0,
            scale: 0.1,
        };
        t(b("attn_norm"), vec![e], f32, norm(next()));
        t(b("attn_q"), vec![e, e], f16, uniform(next(), unit(e)));
        t(b("attn_k"), vec![e, kv], f16, uniform(next(), unit(e)));
        t(b("attn_v"), vec![e, kv], f16, uniform(next(), unit(e)));
        t(
            b("attn_output"),
            vec![e, e],
            f16,
            uniform(next(), 0.5 * unit(e)),
        );
        t(b("ffn_norm"), vec![e], f32, norm(next()));
        let ff = shape.n_ff;
        if shape.is_moe() {
            let x = shape.n_expert;
            // Router logits of a standard deviation near 3: few near-ties between experts.
            t(
                b("ffn_gate_inp"),
                vec![e, x],
                f32,
                uniform(next(), 3.0 * unit(e)),
            );
            t(
                b("ffn_gate_exps"),
                vec![e, ff, x],
                f16,
                uniform(next(), unit(e)),
            );
            t(
                b("ffn_down_exps"),
                vec![ff, e, x],
                f16,
                uniform(next(), 0.5 * unit(ff)),
            );
            t(
                b("ffn_up_exps"),
                vec![e, ff, x],
                f16,
                uniform(next(), unit(e)),
            );
        } else {
            t(b("ffn_gate"), vec![e, ff], f16, uniform(next(), unit(e)));
            t(
                b("ffn_down"),
                vec![ff, e],
                f16,
                uniform(next(), 0.5 * unit(ff)),
            );
            t(b("ffn_up"), vec![e, ff], f16, uniform(next(), unit(e)));
        }
    }
    t("output_norm.weight".into(), vec![e], f32, Fill::Const(1.0));
    t(
        "output.weight".into(),
        vec![e, n_vocab],
        f16,
        uniform(next(), 3.0 * unit(e)),
    );
    w
}

fn uniform(seed: u64, scale: f32) -> Fill {
    Fill::Uniform { seed, scale }
}

/// Writes the model of `shape` to `path`.
pub fn write(shape: &Shape, path: &Path) -> Result<()> {
    writer(shape).write(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_grow_with_the_size_asked_for() {
        assert_eq!(Shape::dense(1).n_embd, 256);
        assert!(Shape::dense(1024).n_embd > Shape::dense(64).n_embd);
        assert_eq!(Shape::dense(1024).n_embd % 256, 0);
        let s = Shape::dense(512);
        let bytes = writer(&s).data_bytes();
        assert!(
            (256 << 20..1024 << 20).contains(&bytes),
            "{bytes} bytes for 512 MiB"
        );
    }

    #[test]
    fn every_word_is_one_token_reached_through_its_prefixes() {
        let (tokens, scores, types) = vocabulary();
        assert_eq!(tokens.len(), scores.len());
        assert_eq!(tokens.len(), types.len());
        let set: std::collections::HashSet<_> = tokens.iter().collect();
        assert_eq!(set.len(), tokens.len(), "tokens are unique");
        for w in words() {
            let full: Vec<char> = format!("{SPACE}{w}").chars().collect();
            for n in 2..=full.len() {
                assert!(set.contains(&full[..n].iter().collect::<String>()));
            }
        }
        assert!(set.contains(&"<0x0A>".to_string()));
    }

    #[test]
    fn text_is_deterministic() {
        assert_eq!(text(100, 5), text(100, 5));
        assert_ne!(text(100, 5), text(100, 6));
        assert_eq!(text(24, 1).lines().count(), 2);
    }
}
