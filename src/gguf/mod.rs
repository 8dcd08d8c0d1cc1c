//! GGUF, the file format llama.cpp loads models from: a writer for the synthetic models
//! `check-build --exercise inference` runs, and a bounded reader of the header, metadata and
//! tensor table (to check what was written, and to size a user's model).
//!
//! Layout (version 3, little-endian): magic `GGUF`, version u32, tensor count u64, metadata count
//! u64; each metadata entry as key string, value type u32, value; each tensor as name string,
//! dimension count u32, dimensions u64 (innermost first), ggml type u32, data offset u64 (from the
//! start of the data section, a multiple of the alignment); padding to the alignment; the data.

pub mod read;
pub mod write;

pub use read::{Header, read_header};
pub use write::Writer;

/// `GGUF` read as a little-endian u32.
pub const MAGIC: [u8; 4] = *b"GGUF";
pub const VERSION: u32 = 3;
/// `general.alignment` when a file does not say otherwise.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Metadata value types (the numbers are the format's).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    ArrStr(Vec<String>),
    ArrF32(Vec<f32>),
    ArrI32(Vec<i32>),
    U64(u64),
}

impl Value {
    pub fn type_id(&self) -> u32 {
        match self {
            Value::U32(_) => 4,
            Value::I32(_) => 5,
            Value::F32(_) => 6,
            Value::Bool(_) => 7,
            Value::Str(_) => 8,
            Value::ArrStr(_) | Value::ArrF32(_) | Value::ArrI32(_) => 9,
            Value::U64(_) => 10,
        }
    }
}

/// The ggml tensor types the writer produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorType {
    F32,
    F16,
}

impl TensorType {
    pub fn id(self) -> u32 {
        match self {
            TensorType::F32 => 0,
            TensorType::F16 => 1,
        }
    }
    pub fn element_size(self) -> u64 {
        match self {
            TensorType::F32 => 4,
            TensorType::F16 => 2,
        }
    }
}

/// IEEE half precision of `x`, rounded to nearest even; out-of-range values saturate to
/// infinity, values below the smallest subnormal become zero.
pub fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        // Subnormal: the implicit bit made explicit, shifted into place, rounded to even.
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let mut r = m >> shift;
        let rest = m & ((1u32 << shift) - 1);
        if rest > half || (rest == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && r & 1 == 1) {
        // A carry into the exponent is the right answer (up to infinity).
        r += 1;
    }
    sign | r as u16
}

/// The f32 value of half-precision bits.
pub fn f16_value(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let man = (h & 0x3ff) as f32;
    match exp {
        0 => sign * man * 2f32.powi(-24),
        0x1f if man == 0.0 => sign * f32::INFINITY,
        0x1f => f32::NAN,
        _ => sign * (1.0 + man / 1024.0) * 2f32.powi(exp - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_round_trips_representable_values() {
        for v in [0.0f32, 1.0, -2.5, 0.000_061_035_156, 65504.0, 0.333_251_95] {
            assert_eq!(f16_value(f16_bits(v)), v, "{v}");
        }
        assert_eq!(f16_bits(1.0), 0x3c00);
        assert_eq!(f16_bits(-2.0), 0xc000);
        assert_eq!(f16_bits(1e6), 0x7c00);
        // Subnormal and rounding.
        assert_eq!(f16_bits(5.960_464_5e-8), 0x0001);
        assert_eq!(f16_bits(1.0 + 1.0 / 2048.0), 0x3c00, "ties to even");
        assert_eq!(f16_bits(1.0 + 3.0 / 2048.0), 0x3c02, "ties to even, up");
    }

    #[test]
    fn half_precision_error_is_within_half_an_ulp() {
        let mut x = -8.0f32;
        while x < 8.0 {
            let back = f16_value(f16_bits(x));
            let ulp = 2f32.powi(x.abs().max(6.2e-5).log2().floor() as i32 - 10);
            assert!(
                (back - x).abs() <= ulp / 2.0 + f32::EPSILON,
                "{x} -> {back}"
            );
            x += 0.001_37;
        }
    }
}
