//! Reading a GGUF file's header, metadata and tensor table, bounded: every count and length is
//! checked against what is left of the file before anything is allocated.

use std::io::{BufReader, Read};
use std::path::Path;

use super::{DEFAULT_ALIGNMENT, MAGIC, Value};
use crate::error::{Error, Result};

/// The header of the file is read only up to this size (tokenizers of big vocabularies take tens
/// of MB).
const MAX_HEADER: u64 = 256 << 20;

#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: u32,
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub version: u32,
    /// Values of the types the writer uses; `None` for the others (read past, not kept).
    pub kvs: Vec<(String, Option<Value>)>,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    /// Where the data section starts in the file.
    pub data_offset: u64,
}

impl Header {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.kvs
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.as_ref())
    }
    pub fn get_u32(&self, key: &str) -> Option<u32> {
        match self.get(key)? {
            Value::U32(v) => Some(*v),
            Value::I32(v) => u32::try_from(*v).ok(),
            Value::U64(v) => u32::try_from(*v).ok(),
            _ => None,
        }
    }
    pub fn get_str(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

struct Cursor<R> {
    r: R,
    at: u64,
    limit: u64,
}

impl<R: Read> Cursor<R> {
    fn bytes(&mut self, n: u64) -> std::result::Result<Vec<u8>, String> {
        if n > self.limit.saturating_sub(self.at) {
            return Err(format!(
                "a field of {n} bytes at offset {} runs past the end",
                self.at
            ));
        }
        let mut v = vec![0u8; n as usize];
        self.r
            .read_exact(&mut v)
            .map_err(|e| format!("read failed at offset {}: {e}", self.at))?;
        self.at += n;
        Ok(v)
    }
    fn u32(&mut self) -> std::result::Result<u32, String> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> std::result::Result<u64, String> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(&b);
        Ok(u64::from_le_bytes(a))
    }
    fn string(&mut self) -> std::result::Result<String, String> {
        let n = self.u64()?;
        let b = self.bytes(n)?;
        String::from_utf8(b).map_err(|_| format!("a string before offset {} is not UTF-8", self.at))
    }
    /// Reads one value of type `ty`; keeps it when the writer's types cover it.
    fn value(&mut self, ty: u32, depth: u32) -> std::result::Result<Option<Value>, String> {
        Ok(match ty {
            0 | 1 => {
                self.bytes(1)?;
                None
            }
            2 | 3 => {
                self.bytes(2)?;
                None
            }
            4 => Some(Value::U32(self.u32()?)),
            5 => Some(Value::I32(self.u32()? as i32)),
            6 => Some(Value::F32(f32::from_bits(self.u32()?))),
            7 => Some(Value::Bool(self.bytes(1)?[0] != 0)),
            8 => Some(Value::Str(self.string()?)),
            9 => {
                if depth > 2 {
                    return Err("arrays nested too deep".into());
                }
                let ety = self.u32()?;
                let n = self.u64()?;
                // Each element takes at least one byte: a count beyond what is left is a lie.
                if n > self.limit.saturating_sub(self.at) {
                    return Err(format!("an array of {n} elements runs past the end"));
                }
                let mut strs = Vec::new();
                let mut f32s = Vec::new();
                let mut i32s = Vec::new();
                for _ in 0..n {
                    match self.value(ety, depth + 1)? {
                        Some(Value::Str(s)) => strs.push(s),
                        Some(Value::F32(f)) => f32s.push(f),
                        Some(Value::I32(i)) => i32s.push(i),
                        _ => {}
                    }
                }
                match ety {
                    8 => Some(Value::ArrStr(strs)),
                    6 => Some(Value::ArrF32(f32s)),
                    5 => Some(Value::ArrI32(i32s)),
                    _ => None,
                }
            }
            10 => Some(Value::U64(self.u64()?)),
            11 | 12 => {
                self.bytes(8)?;
                None
            }
            other => return Err(format!("unknown value type {other}")),
        })
    }
}

/// Reads `path`'s header and tensor table.
pub fn read_header(path: &Path) -> Result<Header> {
    let shown = path.display().to_string();
    let bad = |why: String| {
        Error::input(
            &shown,
            format!("not a usable GGUF model: {why}"),
            "give a llama.cpp GGUF model file (convert one with llama.cpp's convert_hf_to_gguf.py)",
        )
    };
    let f = std::fs::File::open(path).map_err(|e| bad(format!("cannot open: {e}")))?;
    let len = f
        .metadata()
        .map_err(|e| bad(format!("cannot stat: {e}")))?
        .len();
    let mut c = Cursor {
        r: BufReader::new(f),
        at: 0,
        limit: len.min(MAX_HEADER),
    };
    let parsed = (|| -> std::result::Result<Header, String> {
        if c.bytes(4)? != MAGIC {
            return Err("it does not start with GGUF".into());
        }
        let version = c.u32()?;
        if !(2..=3).contains(&version) {
            return Err(format!("version {version} (2 and 3 are known)"));
        }
        let n_tensors = c.u64()?;
        let n_kv = c.u64()?;
        let mut kvs = Vec::new();
        for _ in 0..n_kv {
            let k = c.string()?;
            let ty = c.u32()?;
            let v = c.value(ty, 0)?;
            kvs.push((k, v));
        }
        let mut tensors = Vec::new();
        for _ in 0..n_tensors {
            let name = c.string()?;
            let n_dims = c.u32()?;
            if n_dims > 8 {
                return Err(format!("tensor {name} has {n_dims} dimensions"));
            }
            let mut dims = Vec::new();
            for _ in 0..n_dims {
                dims.push(c.u64()?);
            }
            let ty = c.u32()?;
            let offset = c.u64()?;
            tensors.push(TensorInfo {
                name,
                dims,
                ty,
                offset,
            });
        }
        let alignment = match kvs.iter().find(|(k, _)| k == "general.alignment") {
            Some((_, Some(Value::U32(a)))) if a.is_power_of_two() => *a as u64,
            Some(_) => return Err("general.alignment is not a power of two".into()),
            None => DEFAULT_ALIGNMENT,
        };
        let data_offset = c.at.div_ceil(alignment) * alignment;
        Ok(Header {
            version,
            kvs,
            tensors,
            alignment,
            data_offset,
        })
    })();
    parsed.map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::write::{Fill, Tensor};
    use crate::gguf::{TensorType, Writer};

    #[test]
    fn what_is_written_reads_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("m.gguf");
        let mut w = Writer::new();
        w.kv("general.architecture", Value::Str("llama".into()))
            .kv("llama.block_count", Value::U32(2))
            .kv(
                "tokenizer.ggml.tokens",
                Value::ArrStr(vec!["a".into(), "bc".into()]),
            )
            .kv("tokenizer.ggml.scores", Value::ArrF32(vec![0.5, -1.0]))
            .kv("flag", Value::Bool(true));
        w.tensor(Tensor {
            name: "a".into(),
            dims: vec![3, 5],
            ty: TensorType::F16,
            fill: Fill::Uniform {
                seed: 1,
                scale: 1.0,
            },
        })
        .tensor(Tensor {
            name: "b".into(),
            dims: vec![7],
            ty: TensorType::F32,
            fill: Fill::Const(2.0),
        });
        w.write(&path).expect("written");
        let h = read_header(&path).expect("read");
        assert_eq!(h.version, 3);
        assert_eq!(h.get_str("general.architecture"), Some("llama"));
        assert_eq!(h.get_u32("llama.block_count"), Some(2));
        assert_eq!(
            h.get("tokenizer.ggml.tokens"),
            Some(&Value::ArrStr(vec!["a".into(), "bc".into()]))
        );
        assert_eq!(h.get("flag"), Some(&Value::Bool(true)));
        assert_eq!(h.tensors.len(), 2);
        assert_eq!(h.tensors[0].dims, vec![3, 5]);
        assert_eq!(h.tensors[0].ty, 1);
        assert_eq!(h.tensors[0].offset, 0);
        // 30 bytes of f16 padded to 32.
        assert_eq!(h.tensors[1].offset, 32);
        assert_eq!(h.data_offset % 32, 0);
        let bytes = std::fs::read(&path).expect("bytes");
        assert_eq!(bytes.len() as u64, h.data_offset + 32 + 32);
        let b_at = (h.data_offset + h.tensors[1].offset) as usize;
        assert_eq!(&bytes[b_at..b_at + 4], &2.0f32.to_le_bytes());
        // The same seed, the same bytes.
        let again = dir.path().join("again.gguf");
        w.write(&again).expect("written again");
        assert_eq!(std::fs::read(&again).expect("bytes"), bytes);
    }

    #[test]
    fn truncated_and_foreign_files_are_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = dir.path().join("x.gguf");
        std::fs::write(
            &p,
            b"GGUF\x03\0\0\0\xff\xff\xff\xff\xff\xff\xff\x7f\0\0\0\0\0\0\0\0",
        )
        .expect("w");
        let e = read_header(&p).expect_err("lying count").to_string();
        assert!(e.contains("not a usable GGUF model"), "{e}");
        std::fs::write(&p, b"PK\x03\x04").expect("w");
        assert!(read_header(&p).is_err());
    }

    #[test]
    fn the_synthetic_models_read_back_with_their_shapes() {
        let dir = tempfile::tempdir().expect("temp dir");
        for shape in [
            crate::inference::model::Shape::dense(4),
            crate::inference::model::Shape::moe(4),
        ] {
            let p = dir.path().join("m.gguf");
            crate::inference::model::write(&shape, &p).expect("written");
            let h = read_header(&p).expect("read");
            assert_eq!(
                h.get_u32("llama.embedding_length"),
                Some(shape.n_embd as u32)
            );
            let n_tensors = 3 + shape.n_layer as usize * if shape.is_moe() { 10 } else { 9 };
            assert_eq!(h.tensors.len(), n_tensors);
            let len = std::fs::metadata(&p).expect("meta").len();
            let last = h.tensors.last().expect("tensors");
            assert!(h.data_offset + last.offset < len);
        }
    }
}
