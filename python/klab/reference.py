"""A Python function as a declared operation's reference.

klab runs a command reference in a process of its own, once per case: it writes every ``in``
and ``inout`` buffer as ``<name>.npy`` and ``params.json`` into a private folder, runs the
command there, and reads back ``<name>.npy`` for every ``out`` and ``inout`` buffer, strictly
(the buffer's dtype, its declared shape). This module is such a command for a function::

    # ref.py, beside the manifest
    import numpy as np

    def layer_norm(x, *, eps):        # x: float32 (rows, cols); eps: the f32 the kernel gets
        x = x.astype(np.float64)      # compute in double precision ...
        mean = x.mean(axis=1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps)   # ... rounded once, here, to y's dtype

    # in the manifest's operation table
    reference = { command = ["python3", "-m", "klab.reference", "ref.py:layer_norm"] }

(:func:`klab.manifest.python_reference` writes that table.) The function is called with
keyword arguments: every ``in`` and ``inout`` buffer by its name, as an array of its dtype and
declared shape (``bf16`` as float32 values, which hold every bf16 exactly), and every size
variable and scalar by its name, as the kernel receives it, where the function takes it (a
function with ``**kwargs`` takes them all). It returns the outputs:

- with one ``out`` or ``inout`` buffer, its array;
- with several, a dict by buffer name, or a tuple in the kernel's buffer order;
- ``None`` when it only changed ``inout`` arrays in place (an ``inout`` buffer a dict leaves
  out is taken as it now is). ``None`` with an ``out`` buffer is refused: that buffer is
  missing. So is ``None`` that changed no ``inout`` buffer of more than one element: a
  forgotten ``return`` (``x = np.sort(x)`` rebinds, it does not sort in place) looks the
  same, and against it a kernel that does nothing would pass. Where the inputs may already
  be the answer (sorted data, non-negative data under a ReLU), return the arrays.

Each output is rounded once to its buffer's dtype (to nearest, ties to even; ``bf16`` too),
in its declared shape or flat (any other shape is refused, as klab refuses it in a ``.npy``). An integer buffer takes
integers only, each in its dtype's range: a float result is refused, never truncated. With
``--tensors torch`` the arrays arrive as torch tensors (on ``--device``, default cpu), and
tensors may be returned. Anything wrong ends the command with one line on stderr (and the
function's traceback, when it raised), which klab quotes.

Command line: ``python -m klab.reference FILE.py:FUNCTION`` or ``MODULE:FUNCTION``
(``--tensors numpy|torch``, ``--device DEVICE``), run in the manifest's folder, the call's
folder named by ``KLAB_REF_DIR`` (or by ``--dir``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence

__all__ = ["main", "load_function", "call"]

# The folder klab makes for each call, as it names it in the program's environment.
DIR_ENV = "KLAB_REF_DIR"

_FLOATS = {"f16": "<f2", "f32": "<f4", "f64": "<f8"}
_INTS = {
    "i8": "<i1",
    "u8": "<u1",
    "i16": "<i2",
    "u16": "<u2",
    "i32": "<i4",
    "u32": "<u4",
    "i64": "<i8",
    "u64": "<u8",
}


class ReferenceError_(Exception):
    """A problem with what the function was given or returned: one line for klab to quote."""


def _numpy():
    try:
        import numpy
    except ImportError:
        raise ReferenceError_(
            "klab.reference needs NumPy: pip install numpy (or klab[reference])"
        ) from None
    return numpy


def load_function(spec: str) -> Callable[..., Any]:
    """``FILE.py:NAME`` (relative to the working folder, the manifest's) or ``MODULE:NAME``."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise ReferenceError_(f"{spec!r}: name a function as FILE.py:NAME or MODULE:NAME")
    if where.endswith(".py") or os.sep in where:
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise ReferenceError_(f"{where}: no such file (relative to {os.getcwd()})")
        # Its folder first on the path, so that it imports its neighbours as when run there.
        sys.path.insert(0, os.path.dirname(path))
        module_name = "_klab_reference_" + os.path.splitext(os.path.basename(path))[0]
        spec_ = importlib.util.spec_from_file_location(module_name, path)
        if spec_ is None or spec_.loader is None:
            raise ReferenceError_(f"{where}: Python cannot load it as a module")
        module = importlib.util.module_from_spec(spec_)
        sys.modules[module_name] = module
        spec_.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ReferenceError_(f"{where} has no function {name}")
    return fn


def _inputs(folder: str, buffers: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Every in and inout buffer, as an array of its dtype and shape (bf16 as float32)."""
    np = _numpy()
    arrays = {}
    for b in buffers:
        if b["role"] not in ("in", "inout"):
            continue
        a = np.load(os.path.join(folder, b["name"] + ".npy"), allow_pickle=False)
        if b["dtype"] == "bf16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        arrays[b["name"]] = np.array(a, copy=True).reshape(b["shape"])
    return arrays


def _arguments(
    fn: Callable[..., Any], available: Dict[str, Any], outputs: Sequence[str] = ()
) -> Dict[str, Any]:
    """The keyword arguments `fn` takes of `available`; a parameter it requires that is not
    there is an error naming what is."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return dict(available)
    params = sig.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return dict(available)
    taken = {}
    for p in params:
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            if p.kind is inspect.Parameter.POSITIONAL_ONLY and p.default is p.empty:
                raise ReferenceError_(
                    f"{fn.__name__}: parameter {p.name} is positional-only; klab passes "
                    "buffers, sizes and scalars by name"
                )
            continue
        if p.name in available:
            taken[p.name] = available[p.name]
        elif p.default is p.empty and p.name in outputs:
            raise ReferenceError_(
                f"{fn.__name__} takes {p.name}, an out buffer: klab does not pass outputs; "
                "return it"
            )
        elif p.default is p.empty:
            raise ReferenceError_(
                f"{fn.__name__} takes {p.name}, which is not a buffer, size or scalar of the "
                f"operation (it has: {', '.join(available)})"
            )
    return taken


def _to_numpy(value: Any, name: str) -> Any:
    """A returned value as a NumPy array (a torch tensor moved to the CPU; bf16 widened)."""
    np = _numpy()
    if type(value).__module__.startswith("torch"):
        import torch

        t = value.detach().cpu()
        if t.dtype == torch.bfloat16:
            t = t.to(torch.float32)
        return t.numpy()
    try:
        return np.asarray(value)
    except Exception as e:  # an object NumPy cannot take
        raise ReferenceError_(f"{name}: returned {type(value).__name__}, not an array ({e})")


def _round_to_f32_odd(x: Any) -> Any:
    """float64 to float32, rounded to odd: then rounding that to bf16 to nearest even gives
    the float64's own nearest bf16 (no double rounding)."""
    np = _numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
    inexact = np.isfinite(x) & (f.astype(np.float64) != x)
    toward = np.where(x > f.astype(np.float64), np.float32(np.inf), np.float32(-np.inf))
    g = np.nextafter(f, toward.astype(np.float32))
    f_odd = (f.view(np.uint32) & 1) == 1
    return np.where(inexact & ~f_odd, g, f)


def _bf16_bits(x: Any) -> Any:
    """Values as bf16 raw bits, rounded to nearest, ties to even (NaN stays a quiet NaN)."""
    np = _numpy()
    f = _round_to_f32_odd(x.astype(np.float64)) if x.dtype != np.float32 else x
    u = f.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    quiet = ((u >> 16) | 0x0040).astype(np.uint16)
    return np.where(nan, quiet, rounded).astype("<u2")


def _as_buffer(value: Any, b: Dict[str, Any]) -> Any:
    """A returned output as buffer `b`'s bytes: its dtype (rounded once) and shape."""
    np = _numpy()
    name, dtype, shape = b["name"], b["dtype"], [int(d) for d in b["shape"]]
    a = _to_numpy(value, name)
    if a.dtype == object or a.dtype.kind in "USVMmO":
        raise ReferenceError_(f"{name}: returned {a.dtype} values, not numbers")
    if a.dtype.kind == "c":
        raise ReferenceError_(f"{name}: returned complex values for a {dtype} buffer")
    size = 1
    for d in shape:
        size *= d
    # The declared shape, or the flat one of the same length (as klab reads a .npy): any
    # other shape, a transposed one say, would be taken in C order and scramble the values.
    if tuple(a.shape) != tuple(shape) and not (a.ndim <= 1 and a.size == size):
        raise ReferenceError_(
            f"{name}: returned shape {tuple(a.shape)} ({a.size} elements); the buffer is "
            f"{tuple(shape)} ({size} elements): return that shape, or a flat array"
        )
    a = a.reshape(shape)
    if dtype in _FLOATS:
        with np.errstate(over="ignore", invalid="ignore"):
            return a.astype(_FLOATS[dtype])
    if dtype == "bf16":
        return _bf16_bits(a)
    if dtype in _INTS:
        # An empty result has no values to be wrong (NumPy makes empty arrays float64).
        if a.dtype.kind not in "biu" and a.size:
            raise ReferenceError_(
                f"{name}: returned {a.dtype} values for a {dtype} buffer; return integers "
                "(klab does not truncate)"
            )
        info = np.iinfo(_INTS[dtype])
        if a.size and (a.min() < info.min or a.max() > info.max):
            raise ReferenceError_(
                f"{name}: returned values from {a.min()} to {a.max()}, outside {dtype}"
            )
        return a.astype(_INTS[dtype])
    raise ReferenceError_(f"{name}: klab.reference does not know the dtype {dtype}")


def _outputs(
    result: Any,
    inputs: Dict[str, Any],
    before: Dict[str, Any],
    buffers: List[Dict[str, Any]],
) -> Dict[str, Any]:
    """The function's result as one value per compared buffer (`before`: the inout arrays
    as they were given)."""
    np = _numpy()
    compared = [b for b in buffers if b["role"] in ("out", "inout")]
    names = [b["name"] for b in compared]
    if result is None:
        # A forgotten return hands back the inputs unchanged, and a kernel that does nothing
        # would agree with it. One element is its own answer often enough (a sort at n=1,
        # where every check starts) to be let through.
        # With an out buffer, its absence is the refusal (below).
        only_inout = all(b["role"] == "inout" for b in compared)
        unchanged = all(np.array_equal(inputs[k], v, equal_nan=True) for k, v in before.items())
        if only_inout and unchanged and any(v.size > 1 for v in before.values()):
            raise ReferenceError_(
                f"returned None and changed no inout buffer in place ({', '.join(before)}): a "
                f"forgotten return looks the same; return the arrays where the inputs may "
                f"already be the answer"
            )
        result = {}
    elif isinstance(result, dict):
        unknown = [k for k in result if k not in names]
        if unknown:
            raise ReferenceError_(
                f"returned {', '.join(map(str, unknown))}, which is not an out or inout "
                f"buffer ({', '.join(names)})"
            )
    elif isinstance(result, (tuple, list)) and len(compared) > 1:
        if len(result) != len(compared):
            raise ReferenceError_(
                f"returned {len(result)} values; the operation has {len(compared)} outputs "
                f"({', '.join(names)}), in that order"
            )
        result = dict(zip(names, result))
    elif len(compared) == 1:
        result = {names[0]: result}
    else:
        raise ReferenceError_(
            f"returned one value; the operation has {len(compared)} outputs "
            f"({', '.join(names)}): return a dict or a tuple in that order"
        )
    out = {}
    for b in compared:
        name = b["name"]
        if name in result:
            out[name] = result[name]
        elif b["role"] == "inout":
            out[name] = inputs[name]  # changed in place, or left as it was
        else:
            raise ReferenceError_(f"returned no {name} (an out buffer)")
    return out


def call(fn: Callable[..., Any], folder: str, tensors: str = "numpy", device: str = "cpu") -> None:
    """One call of the reference: read the folder klab made, call `fn`, write its outputs."""
    np = _numpy()
    with open(os.path.join(folder, "params.json")) as f:
        params = json.load(f)
    buffers = params.get("buffers")
    if buffers is None:
        raise ReferenceError_(
            "params.json lists no buffers: this klab is older than klab.reference needs"
        )
    inputs = _inputs(folder, buffers)
    before = {b["name"]: inputs[b["name"]].copy() for b in buffers if b["role"] == "inout"}
    given: Dict[str, Any] = dict(inputs)
    if tensors == "torch":
        import torch

        given = {k: torch.from_numpy(v).to(device) for k, v in inputs.items()}
    available = {**given, **params.get("values", {})}
    outs = [b["name"] for b in buffers if b["role"] == "out"]
    result = fn(**_arguments(fn, available, outs))
    if tensors == "torch":
        inputs = {k: _to_numpy(v, k) for k, v in given.items()}
    by_name = {b["name"]: b for b in buffers}
    for name, value in _outputs(result, inputs, before, buffers).items():
        a = _as_buffer(value, by_name[name])
        np.save(os.path.join(folder, name + ".npy"), np.ascontiguousarray(a), allow_pickle=False)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m klab.reference",
        description="Run a Python function as a klab command reference (one call).",
    )
    parser.add_argument("function", help="FILE.py:NAME or MODULE:NAME")
    parser.add_argument("--tensors", choices=["numpy", "torch"], default="numpy")
    parser.add_argument("--device", default="cpu", help="with --tensors torch (default cpu)")
    parser.add_argument("--dir", help=f"the call's folder (default: ${DIR_ENV})")
    args = parser.parse_args(argv)
    folder = args.dir or os.environ.get(DIR_ENV)
    if not folder:
        print(f"klab.reference: no folder: klab names it in ${DIR_ENV}", file=sys.stderr)
        return 2
    try:
        fn = load_function(args.function)
        call(fn, folder, tensors=args.tensors, device=args.device)
    except ReferenceError_ as e:
        print(f"klab.reference: {args.function}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
