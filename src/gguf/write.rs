//! Writing a GGUF file whose tensors are generated as they are written (a model of several GB
//! never sits in memory), to a temporary file renamed into place: whole, or not at all.

use std::io::{BufWriter, Write};
use std::path::Path;

use super::{DEFAULT_ALIGNMENT, MAGIC, TensorType, VERSION, Value, f16_bits};
use crate::error::{Error, Result};

/// How a tensor's values are made.
#[derive(Debug, Clone, PartialEq)]
pub enum Fill {
    Const(f32),
    /// Uniform in [-scale, scale] from a seeded generator: the same seed, the same bytes.
    Uniform {
        seed: u64,
        scale: f32,
    },
    /// `center` plus uniform noise in [-scale, scale].
    Around {
        seed: u64,
        center: f32,
        scale: f32,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub name: String,
    /// Innermost (contiguous) dimension first, as ggml counts them.
    pub dims: Vec<u64>,
    pub ty: TensorType,
    pub fill: Fill,
}

impl Tensor {
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
    pub fn bytes(&self) -> u64 {
        self.elements() * self.ty.element_size()
    }
}

/// A GGUF file being assembled.
#[derive(Debug, Default)]
pub struct Writer {
    kvs: Vec<(String, Value)>,
    tensors: Vec<Tensor>,
}

/// splitmix64: small, fast, and the same on every platform.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn symmetric(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

fn pad(n: u64, align: u64) -> u64 {
    n.div_ceil(align) * align
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn kv(&mut self, key: &str, value: Value) -> &mut Self {
        self.kvs.push((key.to_string(), value));
        self
    }
    pub fn tensor(&mut self, t: Tensor) -> &mut Self {
        self.tensors.push(t);
        self
    }
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }
    /// Bytes of tensor data (padding included).
    pub fn data_bytes(&self) -> u64 {
        self.tensors
            .iter()
            .map(|t| pad(t.bytes(), DEFAULT_ALIGNMENT))
            .sum()
    }

    /// Writes the file to `path` (through `path.tmp`, renamed when complete).
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut names = std::collections::HashSet::new();
        for t in &self.tensors {
            if !names.insert(&t.name) {
                return Err(Error::input(
                    path.display().to_string(),
                    format!("tensor {} given twice", t.name),
                    "give each tensor once",
                ));
            }
        }
        let tmp = path.with_extension("gguf.tmp");
        let io = |e: std::io::Error| {
            Error::input(
                path.display().to_string(),
                format!("cannot write the model: {e}"),
                "check the folder exists, is writable and has room",
            )
        };
        let result = (|| -> std::io::Result<()> {
            let f = std::fs::File::create(&tmp)?;
            let mut w = BufWriter::with_capacity(1 << 20, f);
            self.write_to(&mut w)?;
            w.flush()?;
            w.get_ref().sync_all()?;
            Ok(())
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(io(e));
        }
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(e)
        })
    }

    /// The whole file, streamed to `w`.
    pub fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        w.write_all(&MAGIC)?;
        w.write_all(&VERSION.to_le_bytes())?;
        w.write_all(&(self.tensors.len() as u64).to_le_bytes())?;
        w.write_all(&(self.kvs.len() as u64).to_le_bytes())?;
        let mut at = 24u64;
        for (k, v) in &self.kvs {
            at += write_str(w, k)?;
            w.write_all(&v.type_id().to_le_bytes())?;
            at += 4 + write_value(w, v)?;
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            at += write_str(w, &t.name)?;
            w.write_all(&(t.dims.len() as u32).to_le_bytes())?;
            for d in &t.dims {
                w.write_all(&d.to_le_bytes())?;
            }
            w.write_all(&t.ty.id().to_le_bytes())?;
            w.write_all(&offset.to_le_bytes())?;
            at += 4 + 8 * t.dims.len() as u64 + 4 + 8;
            offset += pad(t.bytes(), DEFAULT_ALIGNMENT);
        }
        let zeros = [0u8; DEFAULT_ALIGNMENT as usize];
        w.write_all(&zeros[..(pad(at, DEFAULT_ALIGNMENT) - at) as usize])?;
        for t in &self.tensors {
            write_data(w, t)?;
            let b = t.bytes();
            w.write_all(&zeros[..(pad(b, DEFAULT_ALIGNMENT) - b) as usize])?;
        }
        Ok(())
    }
}

fn write_str(w: &mut impl Write, s: &str) -> std::io::Result<u64> {
    w.write_all(&(s.len() as u64).to_le_bytes())?;
    w.write_all(s.as_bytes())?;
    Ok(8 + s.len() as u64)
}

fn write_value(w: &mut impl Write, v: &Value) -> std::io::Result<u64> {
    Ok(match v {
        Value::U32(x) => {
            w.write_all(&x.to_le_bytes())?;
            4
        }
        Value::I32(x) => {
            w.write_all(&x.to_le_bytes())?;
            4
        }
        Value::F32(x) => {
            w.write_all(&x.to_le_bytes())?;
            4
        }
        Value::Bool(x) => {
            w.write_all(&[*x as u8])?;
            1
        }
        Value::U64(x) => {
            w.write_all(&x.to_le_bytes())?;
            8
        }
        Value::Str(s) => write_str(w, s)?,
        Value::ArrStr(a) => {
            w.write_all(&8u32.to_le_bytes())?;
            w.write_all(&(a.len() as u64).to_le_bytes())?;
            let mut n = 12;
            for s in a {
                n += write_str(w, s)?;
            }
            n
        }
        Value::ArrF32(a) => {
            w.write_all(&6u32.to_le_bytes())?;
            w.write_all(&(a.len() as u64).to_le_bytes())?;
            for x in a {
                w.write_all(&x.to_le_bytes())?;
            }
            12 + 4 * a.len() as u64
        }
        Value::ArrI32(a) => {
            w.write_all(&5u32.to_le_bytes())?;
            w.write_all(&(a.len() as u64).to_le_bytes())?;
            for x in a {
                w.write_all(&x.to_le_bytes())?;
            }
            12 + 4 * a.len() as u64
        }
    })
}

fn write_data(w: &mut impl Write, t: &Tensor) -> std::io::Result<()> {
    let n = t.elements();
    let (mut rng, center, scale) = match t.fill {
        Fill::Const(c) => (None, c, 0.0),
        Fill::Uniform { seed, scale } => (Some(Rng::new(seed)), 0.0, scale),
        Fill::Around {
            seed,
            center,
            scale,
        } => (Some(Rng::new(seed)), center, scale),
    };
    let mut buf = Vec::with_capacity(64 << 10);
    let mut done = 0u64;
    while done < n {
        buf.clear();
        let chunk = (n - done).min(16 << 10);
        for _ in 0..chunk {
            let v = center + rng.as_mut().map_or(0.0, |r| r.symmetric() * scale);
            match t.ty {
                TensorType::F32 => buf.extend_from_slice(&v.to_le_bytes()),
                TensorType::F16 => buf.extend_from_slice(&f16_bits(v).to_le_bytes()),
            }
        }
        w.write_all(&buf)?;
        done += chunk;
    }
    Ok(())
}
