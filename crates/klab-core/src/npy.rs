//! NumPy `.npy` files (format versions 1.0, 2.0 and 3.0): read and write one array.
//!
//! The format: the magic `\x93NUMPY`, a major and a minor version byte, the header length
//! (u16 little-endian for 1.0, u32 for 2.0 and 3.0), then the header: a Python dict
//! literal `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }` padded with
//! spaces and ended by `\n` so that the data starts at a multiple of 64 bytes; then the
//! elements in C (row-major) order.
//!
//! [`write()`] produces the bytes `numpy.save` produces (NumPy 1.24 and later, 2.x
//! included): sorted keys, `repr` of the shape, the `21 - len(repr(shape[0]))` spaces of
//! room NumPy leaves to grow the first axis in place, then the padding; version 1.0 unless
//! the header needs more than 65535 bytes (then 2.0).
//!
//! [`read()`] accepts what NumPy writes and rejects, with an error and never a panic,
//! anything klab cannot use: big-endian data, `fortran_order: True`, structured, complex
//! or bool dtypes, data that does not match the shape. It reads from a byte slice and
//! allocates at most the size of that slice.
//!
//! bfloat16 has no NumPy dtype: a bf16 array is written as `<u2` (its raw bit patterns)
//! and reads back as [`Dtype::U16`]; [`Npy::declared`] reinterprets it once the caller
//! (which knows the buffer is bf16 from its manifest) says so.

use std::io::Write;
use std::path::Path;

use crate::artifact::{read_regular, FileError, Input};
use crate::dtype::Dtype;

/// The magic string every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// NumPy aligns the start of the data to this many bytes.
pub const ARRAY_ALIGN: usize = 64;
/// NumPy's room for the growth axis: `len(str(8 * 2**64 - 1))`.
const GROWTH_AXIS_MAX_DIGITS: usize = 21;
/// The most dimensions a header may declare (NumPy 2's limit).
pub const MAX_DIMS: usize = 64;

/// One array read from a `.npy` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Npy {
    pub dtype: Dtype,
    /// The shape; `[]` is a scalar (one element).
    pub shape: Vec<u64>,
    /// The elements, little-endian, row-major: exactly `elements() * dtype.size_bytes()`
    /// bytes.
    pub data: Vec<u8>,
}

/// Why a `.npy` file cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("not a .npy file: it does not start with the magic \\x93NUMPY")]
    BadMagic,
    #[error("truncated .npy file: the {what} needs {need} bytes but the file has {have}")]
    Truncated {
        what: &'static str,
        need: u64,
        have: u64,
    },
    #[error(".npy format version {major}.{minor} is not supported (klab reads 1.0, 2.0 and 3.0)")]
    Version { major: u8, minor: u8 },
    #[error(".npy header declares {declared} bytes but only {available} bytes follow")]
    HeaderLength { declared: u64, available: u64 },
    #[error("bad .npy header: {0}")]
    Header(String),
    #[error("big-endian data (descr '{0}') is not supported: klab reads little-endian .npy files only (in NumPy: a.astype(a.dtype.newbyteorder('<')))")]
    BigEndian(String),
    #[error("descr '{0}' is not supported: klab reads <f2 <f4 <f8 |i1 |u1 <i2 <u2 <i4 <u4 <i8 <u8 (bf16 as <u2)")]
    Descr(String),
    #[error("fortran_order: True is not supported: klab reads C-order (row-major) arrays only (in NumPy: np.ascontiguousarray(a))")]
    FortranOrder,
    #[error("shape {shape} of {dtype} holds more bytes than fit in 64 bits")]
    ShapeOverflow { shape: String, dtype: Dtype },
    #[error(
        "shape {shape} of {dtype} needs {expected} data bytes but {got} bytes follow the header"
    )]
    DataLength {
        shape: String,
        dtype: Dtype,
        expected: u64,
        got: u64,
    },
    #[error("the file holds {file} ({descr}) but {declared} was declared")]
    DtypeMismatch {
        file: Dtype,
        descr: &'static str,
        declared: Dtype,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Not a readable regular file within [`Input::NPY`]'s cap.
    #[error(transparent)]
    File(#[from] FileError),
}

impl Npy {
    /// Elements in the array (1 for a scalar).
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The array as `declared`: the same dtype, or one stored under the same descriptor
    /// (a bf16 buffer stored as `<u2` reads back as u16). Any other dtype is an error.
    pub fn declared(self, declared: Dtype) -> Result<Npy, NpyError> {
        if self.dtype == declared || self.dtype.npy_descr() == declared.npy_descr() {
            Ok(Npy {
                dtype: declared,
                ..self
            })
        } else {
            Err(NpyError::DtypeMismatch {
                file: self.dtype,
                descr: self.dtype.npy_descr(),
                declared,
            })
        }
    }

    /// Write the array ([`write()`]).
    pub fn write_to<W: Write>(&self, out: W) -> Result<(), NpyError> {
        write(out, self.dtype, &self.shape, &self.data)
    }
}

/// `()`, `(5,)`, `(3, 4)`: the shape as Python's `repr` writes a tuple.
pub fn shape_repr(shape: &[u64]) -> String {
    match shape {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}

/// Data bytes the shape needs, or `None` on overflow.
fn data_bytes(dtype: Dtype, shape: &[u64]) -> Option<u64> {
    shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))?
        .checked_mul(dtype.size_bytes() as u64)
}

/// The preamble and header `numpy.save` writes for a C-order array of `dtype` and
/// `shape`: magic, version, header length, dict, growth room, padding, `\n`.
pub fn header(dtype: Dtype, shape: &[u64]) -> Vec<u8> {
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        dtype.npy_descr(),
        shape_repr(shape)
    );
    if let Some(first) = shape.first() {
        let digits = first.to_string().len();
        dict.extend(std::iter::repeat_n(
            ' ',
            GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits),
        ));
    }
    let hlen = dict.len() + 1; // with the final '\n'
                               // NumPy's padding: ARRAY_ALIGN - (prefix + hlen) % ARRAY_ALIGN, so 1..=64 spaces.
    let pad = |prefix: usize| ARRAY_ALIGN - (prefix + hlen) % ARRAY_ALIGN;
    let (v1_pad, v2_pad) = (pad(10), pad(12));
    let mut out = Vec::with_capacity(12 + hlen + v2_pad);
    out.extend_from_slice(MAGIC);
    let padlen = if hlen + v1_pad <= usize::from(u16::MAX) {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&((hlen + v1_pad) as u16).to_le_bytes());
        v1_pad
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&((hlen + v2_pad) as u32).to_le_bytes());
        v2_pad
    };
    out.extend_from_slice(dict.as_bytes());
    out.extend(std::iter::repeat_n(b' ', padlen));
    out.push(b'\n');
    out
}

/// Write one array as a `.npy` file to `out` (the caller makes file writes atomic).
/// `data` holds the elements little-endian in row-major order and must be exactly the
/// shape's size; a bf16 array is written as `<u2` (see the module documentation).
pub fn write<W: Write>(
    mut out: W,
    dtype: Dtype,
    shape: &[u64],
    data: &[u8],
) -> Result<(), NpyError> {
    let expected = data_bytes(dtype, shape).ok_or_else(|| NpyError::ShapeOverflow {
        shape: shape_repr(shape),
        dtype,
    })?;
    if expected != data.len() as u64 {
        return Err(NpyError::DataLength {
            shape: shape_repr(shape),
            dtype,
            expected,
            got: data.len() as u64,
        });
    }
    out.write_all(&header(dtype, shape))?;
    out.write_all(data)?;
    out.flush()?;
    Ok(())
}

/// The bytes of a `.npy` file holding one array ([`write()`] into memory).
pub fn to_bytes(dtype: Dtype, shape: &[u64], data: &[u8]) -> Result<Vec<u8>, NpyError> {
    let mut out = Vec::new();
    write(&mut out, dtype, shape, data)?;
    Ok(out)
}

/// Read a `.npy` file from disk ([`read()`]).
pub fn read_file(path: &Path) -> Result<Npy, NpyError> {
    read(&read_regular(path, Input::NPY)?)
}

/// Parse one array from the bytes of a `.npy` file. See the module documentation for
/// what is accepted; every malformed input is an error, never a panic, and nothing is
/// allocated beyond the size of `bytes`.
pub fn read(bytes: &[u8]) -> Result<Npy, NpyError> {
    let have = bytes.len() as u64;
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        // A short file that is a prefix of the magic is truncated; anything else is not .npy.
        return Err(if MAGIC.starts_with(bytes) {
            NpyError::Truncated {
                what: "magic and version",
                need: 8,
                have,
            }
        } else {
            NpyError::BadMagic
        });
    }
    if bytes.len() < 8 {
        return Err(NpyError::Truncated {
            what: "magic and version",
            need: 8,
            have,
        });
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let len_bytes = match (major, minor) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        _ => return Err(NpyError::Version { major, minor }),
    };
    let start = 8 + len_bytes;
    if bytes.len() < start {
        return Err(NpyError::Truncated {
            what: "header length",
            need: start as u64,
            have,
        });
    }
    let mut word = [0u8; 4];
    word[..len_bytes].copy_from_slice(&bytes[8..start]);
    let declared = u64::from(u32::from_le_bytes(word));
    let available = (bytes.len() - start) as u64;
    if declared > available {
        return Err(NpyError::HeaderLength {
            declared,
            available,
        });
    }
    let data_start = start + declared as usize;
    let text = &bytes[start..data_start];
    let h = parse_header(text)?;

    let dtype = match Dtype::from_npy_descr(&h.descr) {
        Some(d) => d,
        None => {
            let one_byte = h
                .descr
                .strip_prefix('>')
                .and_then(|code| Dtype::from_npy_descr(&format!("|{code}")));
            match one_byte {
                // '>u1' is a one-byte type with a redundant byte order: the same data.
                Some(d) => d,
                None if h.descr.starts_with('>') => return Err(NpyError::BigEndian(h.descr)),
                None => return Err(NpyError::Descr(h.descr)),
            }
        }
    };
    if h.fortran_order {
        return Err(NpyError::FortranOrder);
    }
    let expected = data_bytes(dtype, &h.shape).ok_or_else(|| NpyError::ShapeOverflow {
        shape: shape_repr(&h.shape),
        dtype,
    })?;
    let got = (bytes.len() - data_start) as u64;
    if expected != got {
        return Err(NpyError::DataLength {
            shape: shape_repr(&h.shape),
            dtype,
            expected,
            got,
        });
    }
    Ok(Npy {
        dtype,
        shape: h.shape,
        data: bytes[data_start..].to_vec(),
    })
}

struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
}

enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
}

/// A parser for the header's dict literal: string keys; string, bool and int-tuple values
/// (a Python 2 `L` suffix on ints allowed); whitespace anywhere Python allows it.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn err<T>(&self, what: &str) -> Result<T, NpyError> {
        let near: String = String::from_utf8_lossy(&self.s[self.i.min(self.s.len())..])
            .chars()
            .take(24)
            .collect();
        Err(NpyError::Header(format!(
            "{what} at byte {} of the header (near {near:?})",
            self.i
        )))
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn string(&mut self) -> Result<String, NpyError> {
        self.ws();
        let quote = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return self.err("expected a quoted string"),
        };
        self.i += 1;
        let begin = self.i;
        while let Some(c) = self.peek() {
            match c {
                _ if c == quote => {
                    let s = String::from_utf8_lossy(&self.s[begin..self.i]).into_owned();
                    self.i += 1;
                    return Ok(s);
                }
                b'\\' => return self.err("unsupported escape in a string"),
                b'\n' => return self.err("unterminated string"),
                _ => self.i += 1,
            }
        }
        self.err("unterminated string")
    }

    fn int(&mut self) -> Result<u64, NpyError> {
        self.ws();
        let begin = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        if begin == self.i {
            return self.err("expected a non-negative integer dimension");
        }
        let digits = std::str::from_utf8(&self.s[begin..self.i]).expect("ASCII digits");
        let v = match digits.parse::<u64>() {
            Ok(v) => v,
            Err(_) => {
                self.i = begin;
                return self.err("dimension does not fit in 64 bits");
            }
        };
        if matches!(self.peek(), Some(b'L' | b'l')) {
            self.i += 1; // Python 2 long
        }
        Ok(v)
    }

    fn value(&mut self) -> Result<Value, NpyError> {
        self.ws();
        let rest = &self.s[self.i..];
        match self.peek() {
            Some(b'\'' | b'"') => Ok(Value::Str(self.string()?)),
            Some(b'(') => {
                self.i += 1;
                let mut dims = Vec::new();
                if self.eat(b')') {
                    return Ok(Value::Tuple(dims));
                }
                loop {
                    if dims.len() == MAX_DIMS {
                        return self.err(&format!("more than {MAX_DIMS} dimensions"));
                    }
                    dims.push(self.int()?);
                    if self.eat(b')') {
                        if dims.len() == 1 {
                            // Python's (5) is an int, not a tuple.
                            return self.err("a one-element shape needs a trailing comma, as in (5,)");
                        }
                        return Ok(Value::Tuple(dims));
                    }
                    if !self.eat(b',') {
                        return self.err("expected ',' or ')' in the shape");
                    }
                    if self.eat(b')') {
                        return Ok(Value::Tuple(dims));
                    }
                }
            }
            Some(b'[') => self.err(
                "unsupported list (a structured dtype's descr is a list; klab reads plain dtypes only)",
            ),
            _ if rest.starts_with(b"True") => {
                self.i += 4;
                Ok(Value::Bool(true))
            }
            _ if rest.starts_with(b"False") => {
                self.i += 5;
                Ok(Value::Bool(false))
            }
            _ => self.err("expected a string, True, False or a tuple of integers"),
        }
    }
}

fn parse_header(text: &[u8]) -> Result<Header, NpyError> {
    let mut p = Parser { s: text, i: 0 };
    if !p.eat(b'{') {
        return p.err("expected '{' (the header is a dict)");
    }
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        if p.eat(b'}') {
            break;
        }
        let key_at = p.i;
        let key = p.string()?;
        if !matches!(key.as_str(), "descr" | "fortran_order" | "shape") {
            p.i = key_at;
            return p.err(&format!(
                "unexpected key '{key}' (a .npy header has exactly 'descr', 'fortran_order' and 'shape')"
            ));
        }
        if !p.eat(b':') {
            return p.err(&format!("expected ':' after key '{key}'"));
        }
        let value = p.value()?;
        let slot_taken = match (key.as_str(), value) {
            ("descr", Value::Str(s)) => descr.replace(s).is_some(),
            ("fortran_order", Value::Bool(b)) => fortran.replace(b).is_some(),
            ("shape", Value::Tuple(t)) => shape.replace(t).is_some(),
            _ => {
                p.i = key_at;
                return p.err(&format!(
                    "'{key}' must be {}",
                    match key.as_str() {
                        "descr" => "a string such as '<f4'",
                        "fortran_order" => "True or False",
                        _ => "a tuple of integers",
                    }
                ));
            }
        };
        if slot_taken {
            p.i = key_at;
            return p.err(&format!("key '{key}' appears twice"));
        }
        if p.eat(b'}') {
            break;
        }
        if !p.eat(b',') {
            return p.err("expected ',' or '}' after a value");
        }
    }
    p.ws();
    if p.i != text.len() {
        return p.err("unexpected text after the dict");
    }
    let missing = |k: &str| NpyError::Header(format!("the header has no '{k}' key"));
    Ok(Header {
        descr: descr.ok_or_else(|| missing("descr"))?,
        fortran_order: fortran.ok_or_else(|| missing("fortran_order"))?,
        shape: shape.ok_or_else(|| missing("shape"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic bytes.
    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// A v1.0 file the way NumPy writes it, built by hand: the dict text, `extra` spaces,
    /// padding to `total` header bytes (magic to '\n' inclusive), then the data.
    fn by_hand(dict: &str, total: usize, data: &[u8]) -> Vec<u8> {
        assert!(
            10 + dict.len() < total,
            "the dict does not fit {total} bytes"
        );
        let header_len = total - 10;
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        f.extend_from_slice(&(header_len as u16).to_le_bytes());
        f.extend_from_slice(dict.as_bytes());
        f.resize(total - 1, b' ');
        f.push(b'\n');
        f.extend_from_slice(data);
        f
    }

    #[test]
    fn round_trip_every_dtype_and_shape() {
        let shapes: [&[u64]; 5] = [&[], &[5], &[3, 4], &[2, 0, 3], &[1, 2, 3, 4]];
        for d in Dtype::ALL {
            for (s, shape) in shapes.iter().enumerate() {
                let n: u64 = shape.iter().product();
                let data = bytes(n as usize * d.size_bytes(), s as u64 + 1);
                let file = to_bytes(d, shape, &data).unwrap();
                assert_eq!(file.len() % ARRAY_ALIGN, data.len() % ARRAY_ALIGN);
                assert_eq!((file.len() - data.len()) % ARRAY_ALIGN, 0);
                let back = read(&file).unwrap().declared(d).unwrap();
                assert_eq!(
                    back,
                    Npy {
                        dtype: d,
                        shape: shape.to_vec(),
                        data: data.clone()
                    }
                );
                assert_eq!(back.elements(), n);
            }
        }
    }

    #[test]
    fn bf16_is_stored_as_u2() {
        let data = [0x80, 0x3f, 0xc1, 0xff];
        let file = to_bytes(Dtype::Bf16, &[2], &data).unwrap();
        assert!(String::from_utf8_lossy(&file).contains("'descr': '<u2'"));
        let npy = read(&file).unwrap();
        assert_eq!(npy.dtype, Dtype::U16);
        let bf = npy.clone().declared(Dtype::Bf16).unwrap();
        assert_eq!((bf.dtype, bf.data.as_slice()), (Dtype::Bf16, &data[..]));
        let e = npy.declared(Dtype::F16).unwrap_err().to_string();
        assert_eq!(e, "the file holds u16 (<u2) but f16 was declared");
    }

    #[test]
    fn header_is_byte_exact_with_numpy() {
        // np.save of np.arange(12, dtype='<f4').reshape(3, 4) (NumPy >= 1.24): the dict,
        // 20 spaces of growth room for the 1-digit first axis, padding to 128 bytes.
        let data: Vec<u8> = (0..12).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let want = by_hand(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
            128,
            &data,
        );
        assert_eq!(&want[8..10], &[118, 0]);
        assert_eq!(to_bytes(Dtype::F32, &[3, 4], &data).unwrap(), want);
        // A scalar has no growth room: np.save(f, np.float64(1.5)).
        let want = by_hand(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
            128,
            &1.5f64.to_le_bytes(),
        );
        assert_eq!(
            to_bytes(Dtype::F64, &[], &1.5f64.to_le_bytes()).unwrap(),
            want
        );
        // One-byte and 1-D: np.save(f, np.array([1, 2, 3], dtype=np.int8)).
        let want = by_hand(
            "{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }",
            128,
            &[1, 2, 3],
        );
        assert_eq!(to_bytes(Dtype::I8, &[3], &[1, 2, 3]).unwrap(), want);
        // The text of the header, for the record.
        let h = header(Dtype::U64, &[123_456, 7]);
        let text = String::from_utf8(h[10..].to_vec()).unwrap();
        assert_eq!(
            text.trim_end(),
            "{'descr': '<u8', 'fortran_order': False, 'shape': (123456, 7), }"
        );
        assert_eq!(text.len() + 10, 128);
        assert!(text.ends_with(" \n"));
    }

    #[test]
    fn padding_is_numpys_even_when_already_aligned() {
        // NumPy pads with ARRAY_ALIGN - (prefix + hlen) % ARRAY_ALIGN spaces: 64, not 0,
        // when the dict already ends on the boundary. For every length of first axis the
        // header is a multiple of 64 and holds 1..=64 padding spaces after the growth room.
        for digits in 1..=20u32 {
            let first = 10u64.pow(digits - 1);
            let h = header(Dtype::F32, &[first]);
            assert_eq!(h.len() % ARRAY_ALIGN, 0);
            let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({first},), }}");
            let growth = 21 - digits as usize;
            let pad = h.len() - 10 - dict.len() - growth - 1;
            assert!((1..=64).contains(&pad), "{digits}: {pad}");
            assert_eq!(pad, 64 - (10 + dict.len() + growth + 1) % 64);
        }
    }

    #[test]
    fn reads_older_numpy_and_python2_headers() {
        // NumPy < 1.24: no growth room; < 1.14: 16-byte alignment; Python 2: 3L; version 2.0.
        let data = 7.0f64.to_le_bytes();
        let old = by_hand(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }",
            80,
            &data,
        );
        assert_eq!(read(&old).unwrap().shape, [1]);
        let py2 = by_hand(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1L,), }",
            80,
            &data,
        );
        assert_eq!(read(&py2).unwrap().shape, [1]);
        let reordered = by_hand(
            "{\"shape\": (1, ), \"fortran_order\": False, \"descr\": \"<f8\"}",
            80,
            &data,
        );
        assert_eq!(read(&reordered).unwrap().dtype, Dtype::F64);
        let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
        let dict = "{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }\n";
        v2.extend_from_slice(&(dict.len() as u32).to_le_bytes());
        v2.extend_from_slice(dict.as_bytes());
        v2.extend_from_slice(&[1, 0, 2, 0]);
        let npy = read(&v2).unwrap();
        assert_eq!(
            (npy.dtype, npy.data.as_slice()),
            (Dtype::I16, &[1u8, 0, 2, 0][..])
        );
        // '>u1' is one byte: no byte order to get wrong.
        let f = by_hand(
            "{'descr': '>u1', 'fortran_order': False, 'shape': (1,), }",
            128,
            &[9],
        );
        assert_eq!(read(&f).unwrap().dtype, Dtype::U8);
    }

    fn err(file: &[u8]) -> String {
        read(file).unwrap_err().to_string()
    }

    fn with_dict(dict: &str, data: &[u8]) -> Vec<u8> {
        let total = (10 + dict.len() + 1).div_ceil(64) * 64;
        by_hand(dict, total, data)
    }

    #[test]
    fn hostile_inputs_are_errors() {
        let good = to_bytes(Dtype::F32, &[2, 2], &[0; 16]).unwrap();
        assert!(read(&good).is_ok());
        assert_eq!(
            err(b""),
            "truncated .npy file: the magic and version needs 8 bytes but the file has 0"
        );
        assert!(err(b"\x93NUM").contains("truncated"));
        assert!(err(b"PK\x03\x04 not npy").contains("does not start with the magic"));
        assert!(err(b"\x93NUMPX\x01\x00\x00\x00").contains("magic"));
        assert!(err(b"\x93NUMPY\x01").contains("truncated"));
        assert!(err(b"\x93NUMPY\x01\x00\x10").contains("header length needs 10 bytes"));
        assert!(err(b"\x93NUMPY\x04\x00\x00\x00\x00\x00").contains("version 4.0"));
        // Declared header lengths beyond the file, v1 and v2.
        let mut f = good.clone();
        f[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(
            err(&f),
            format!(
                ".npy header declares 65535 bytes but only {} bytes follow",
                good.len() - 10
            )
        );
        let mut f = b"\x93NUMPY\x02\x00".to_vec();
        f.extend_from_slice(&u32::MAX.to_le_bytes());
        f.extend_from_slice(b"{}");
        assert!(err(&f).contains("declares 4294967295 bytes but only 2"));
        // Truncated and overlong data.
        assert!(err(&good[..good.len() - 1]).contains("needs 16 data bytes but 15 bytes follow"));
        let mut long = good.clone();
        long.push(0);
        assert!(err(&long).contains("needs 16 data bytes but 17"));
        // Shapes that overflow, or do not fit u64, or are negative.
        let e = err(&with_dict(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551615, 18446744073709551615), }",
            &[],
        ));
        assert!(e.contains("more bytes than fit in 64 bits"), "{e}");
        let e = err(&with_dict(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }",
            &[],
        ));
        assert!(e.contains("more bytes than fit"), "{e}");
        let e = err(&with_dict(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }",
            &[],
        ));
        assert!(e.contains("does not fit in 64 bits"), "{e}");
        assert!(err(&with_dict(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
            &[]
        ))
        .contains("non-negative"));
        // A huge declared shape with no data is a length error, not an allocation.
        let e = err(&with_dict(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1000), }",
            &[],
        ));
        assert!(e.contains("needs 4000000000000 data bytes but 0"), "{e}");
    }

    #[test]
    fn layouts_dtypes_and_dicts_klab_does_not_read_are_errors() {
        let e = err(&with_dict(
            "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }",
            &[0; 8],
        ));
        assert!(e.contains("fortran_order: True is not supported"), "{e}");
        let e = err(&with_dict(
            "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
            &[0; 8],
        ));
        assert!(e.starts_with("big-endian data (descr '>f4')"), "{e}");
        assert!(err(&with_dict(
            "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }",
            &[0; 2]
        ))
        .contains("descr '|b1' is not supported"));
        assert!(err(&with_dict(
            "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
            &[0; 8]
        ))
        .contains("'<c8'"));
        let e = err(&with_dict(
            "{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1,), }",
            &[0; 4],
        ));
        assert!(e.contains("structured"), "{e}");
        // Malformed dicts.
        for (dict, why) in [
            ("{'descr': '<f4', 'fortran_order': False}", "no 'shape' key"),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
                "unexpected key 'x'",
            ),
            (
                "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
                "appears twice",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } junk",
                "after the dict",
            ),
            (
                "{'descr': '<f4, 'fortran_order': False, 'shape': (1,), }",
                "expected ',' or '}'",
            ),
            (
                "{'descr' '<f4', 'fortran_order': False, 'shape': (1,), }",
                "expected ':'",
            ),
            (
                "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }",
                "expected a string, True",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1), }",
                "trailing comma",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': [1], }",
                "structured",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,,), }",
                "non-negative",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': '1', }",
                "'shape' must be a tuple",
            ),
            (
                "{'descr': '<f4' 'fortran_order': False, 'shape': (1,), }",
                "expected ',' or '}'",
            ),
            ("['descr']", "expected '{'"),
            (
                "{'descr': '<f\\4', 'fortran_order': False, 'shape': (1,), }",
                "escape",
            ),
            ("{'descr", "unterminated"),
        ] {
            let e = err(&with_dict(dict, &[0; 4]));
            assert!(
                e.starts_with("bad .npy header") && e.contains(why),
                "{dict}: {e}"
            );
        }
        let too_many = format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}",
            "1, ".repeat(65)
        );
        assert!(err(&with_dict(&too_many, &[0; 4])).contains("more than 64 dimensions"));
    }

    #[test]
    fn no_truncation_or_mutation_panics() {
        let files = [
            to_bytes(Dtype::F32, &[3, 4], &[0; 48]).unwrap(),
            to_bytes(Dtype::Bf16, &[], &[1, 2]).unwrap(),
            to_bytes(Dtype::U64, &[0], &[]).unwrap(),
        ];
        for f in &files {
            for len in 0..f.len() {
                assert!(read(&f[..len]).is_err(), "prefix {len}");
            }
            let mut x = 0x2545_f491_4f6c_dd1du64;
            for _ in 0..5000 {
                let mut g = f.clone();
                for _ in 0..1 + (x % 4) as usize {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let i = (x as usize) % g.len();
                    g[i] = (x >> 32) as u8;
                }
                if let Ok(npy) = read(&g) {
                    assert_eq!(
                        npy.data.len() as u64,
                        npy.elements() * npy.dtype.size_bytes() as u64
                    );
                }
            }
        }
    }

    #[test]
    fn write_checks_the_data_length() {
        let e = to_bytes(Dtype::F32, &[3], &[0; 8]).unwrap_err().to_string();
        assert_eq!(
            e,
            "shape (3,) of f32 needs 12 data bytes but 8 bytes follow the header"
        );
        let e = to_bytes(Dtype::F64, &[u64::MAX, 2], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("more bytes than fit"), "{e}");
        assert_eq!(shape_repr(&[]), "()");
        assert_eq!(shape_repr(&[5]), "(5,)");
        assert_eq!(shape_repr(&[3, 4]), "(3, 4)");
    }

    /// Issue 15: a FIFO or `/dev/zero` given as a `.npy` input hung or filled memory.
    #[test]
    fn a_fifo_or_a_device_as_an_npy_input_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("x.npy");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        for (p, is) in [
            (fifo.as_path(), "is a FIFO (named pipe)"),
            (Path::new("/dev/zero"), "is a character device"),
        ] {
            let e = read_file(p).unwrap_err();
            assert!(matches!(e, NpyError::File(_)), "{e:?}");
            assert!(
                e.to_string().contains(&format!(
                    "{is}, not a regular file; klab reads a .npy array"
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.npy");
        let data = bytes(24, 9);
        write(
            std::fs::File::create(&path).unwrap(),
            Dtype::I16,
            &[3, 4],
            &data,
        )
        .unwrap();
        let npy = read_file(&path).unwrap();
        assert_eq!(
            (npy.dtype, npy.shape.as_slice(), npy.data),
            (Dtype::I16, &[3u64, 4][..], data)
        );
        assert!(matches!(
            read_file(&dir.path().join("missing.npy")),
            Err(NpyError::File(_))
        ));
    }

    /// Cross-checks against NumPy itself when python3 has it; otherwise says so loudly.
    #[test]
    fn agrees_with_numpy_when_available() {
        let has_numpy = std::process::Command::new("python3")
            .args(["-c", "import numpy"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !has_numpy {
            eprintln!(
                "SKIPPED npy::tests::agrees_with_numpy_when_available: python3 with numpy is not \
                 available here; only the hand-built NumPy-format files were checked"
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let cases: [(&str, Dtype, &[u64]); 8] = [
            ("float16", Dtype::F16, &[3, 5]),
            ("float32", Dtype::F32, &[7]),
            ("float64", Dtype::F64, &[]),
            ("int8", Dtype::I8, &[2, 3, 4]),
            ("uint8", Dtype::U8, &[0]),
            ("int32", Dtype::I32, &[1234567, 0]),
            ("uint64", Dtype::U64, &[4, 1]),
            ("uint16", Dtype::U16, &[10]),
        ];
        let mut script = String::from("import numpy as np, sys\nd = sys.argv[1]\n");
        for (i, (name, dtype, shape)) in cases.iter().enumerate() {
            let n: u64 = shape.iter().product();
            let data = bytes(n as usize * dtype.size_bytes(), i as u64 + 100);
            std::fs::write(
                d.join(format!("ours{i}.npy")),
                to_bytes(*dtype, shape, &data).unwrap(),
            )
            .unwrap();
            std::fs::write(d.join(format!("raw{i}.bin")), &data).unwrap();
            let shape_py = shape_repr(shape);
            script += &format!(
                "raw = open(d + '/raw{i}.bin', 'rb').read()\n\
                 a = (np.frombuffer(raw, dtype='{name}') if raw else np.zeros(0, dtype='{name}')).reshape({shape_py})\n\
                 np.save(d + '/np{i}.npy', a)\n\
                 b = np.load(d + '/ours{i}.npy')\n\
                 assert b.dtype == a.dtype and b.shape == a.shape, (b.dtype, b.shape)\n\
                 assert b.tobytes() == a.tobytes()\n"
            );
        }
        let out = std::process::Command::new("python3")
            .args(["-c", &script, d.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let version = std::process::Command::new("python3")
            .args(["-c", "import numpy; print(numpy.__version__)"])
            .output()
            .unwrap();
        let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
        let modern = {
            let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
            (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (1, 24)
        };
        for (i, (_, dtype, shape)) in cases.iter().enumerate() {
            let theirs = std::fs::read(d.join(format!("np{i}.npy"))).unwrap();
            let ours = std::fs::read(d.join(format!("ours{i}.npy"))).unwrap();
            let npy = read(&theirs).unwrap();
            assert_eq!((npy.dtype, npy.shape.as_slice()), (*dtype, *shape));
            if modern {
                assert_eq!(
                    theirs, ours,
                    "numpy {version} wrote different bytes for case {i}"
                );
            } else {
                eprintln!(
                    "numpy {version} predates the growth room: bytes not compared for case {i}"
                );
            }
        }
    }
}
