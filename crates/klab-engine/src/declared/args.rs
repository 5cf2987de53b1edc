//! A launch's arguments in its parameter order, from the operation's buffers, sizes and
//! scalars.

use crate::backend::Arg;
use klab_spec::declared::launches::DeclaredLaunch;

use super::*;

/// `launch`'s arguments in its parameter order. `bufs`, `ints` and `floats` are
/// the operation's values in the operation's parameter order (`op.params`): its
/// buffers, and its integer and float sizes and scalars each in the order they
/// appear. A size the operation's parameters leave out (a launch parameter only this
/// entry takes) is read from `shape`.
pub fn launch_args<'a, T>(
    launch: &DeclaredLaunch<'_>,
    op: &DeclaredOp,
    shape: &Shape,
    bufs: &'a [T],
    ints: &[i64],
    floats: &[f64],
) -> Vec<Arg<'a, T>> {
    let (mut i, mut f, mut k) = (0, 0, 0);
    let mut buffer_at = std::collections::BTreeMap::new();
    let mut value_of = std::collections::BTreeMap::new();
    for p in &op.params {
        match p {
            OpParam::Buffer(name) => {
                buffer_at.insert(name.as_str(), k);
                k += 1;
            }
            OpParam::Size(name, dt) | OpParam::Scalar(name, dt) if !dt.is_float() => {
                value_of.insert(name.as_str(), Value::Int(ints[i]));
                i += 1;
            }
            OpParam::Size(name, _) | OpParam::Scalar(name, _) => {
                value_of.insert(name.as_str(), Value::Float(floats[f]));
                f += 1;
            }
        }
    }
    launch
        .params
        .iter()
        .map(|p| match p {
            OpParam::Buffer(name) => Arg::Buffer(&bufs[buffer_at[name.as_str()]]),
            OpParam::Size(name, dt) | OpParam::Scalar(name, dt) => {
                let v = value_of
                    .get(name.as_str())
                    .copied()
                    .unwrap_or_else(|| Value::Int(shape[name]));
                v.as_arg(*dt)
            }
        })
        .collect()
}

/// A size's or scalar's value before it takes its parameter's type.
#[derive(Debug, Clone, Copy)]
enum Value {
    Int(i64),
    Float(f64),
}

impl Value {
    fn as_arg<'a, T>(self, dt: Dtype) -> Arg<'a, T> {
        let (int, float) = match self {
            Value::Int(v) => (v, v as f64),
            Value::Float(v) => (v as i64, v),
        };
        match dt {
            Dtype::I32 => Arg::I32(int as i32),
            Dtype::U32 => Arg::U32(int as u32),
            Dtype::U64 => Arg::U64(int as u64),
            Dtype::F16 => Arg::F16(dt.bits_of_f64(float) as u16),
            Dtype::Bf16 => Arg::Bf16(dt.bits_of_f64(float) as u16),
            Dtype::F32 => Arg::F32(float as f32),
            Dtype::F64 => Arg::F64(float),
            _ => Arg::I64(int),
        }
    }
}
