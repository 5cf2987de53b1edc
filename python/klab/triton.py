"""A ``@triton.jit`` kernel as a klab kernel: compiled by Triton for the device ahead of
time, loaded by klab from Triton's cubin, and put through every gate like any kernel.

    import triton, triton.language as tl
    from klab import triton as kt

    @triton.jit
    def softmax(y_ptr, x_ptr, rows, cols, BLOCK: tl.constexpr):
        ...

    kt.export(
        softmax,
        name="softmax_triton",
        params=["y", "x", "rows:i32", "cols:i32"],   # the arguments klab passes, in order
        constexprs={"BLOCK": 1024},
        num_warps=4, num_stages=3,
        grid=["rows"],                               # klab expressions over the sizes
        op=softmax_op,                               # the declared operation (a dict)
        out_dir="build/klab",
    )
    # build/klab/softmax_triton.toml and .cubin: klab check build/klab/softmax_triton.toml

What the export takes from Triton, and why:

- **The cubin and its entry**: ``triton.compile`` for ``cuda`` at ``arch`` (default: the
  device's, from ``klab env``), with the ``num_warps``, ``num_stages`` and constexpr values
  given: the same choices an autotuner would make, fixed, since a receipt must name them.
  Pointers are declared 16-byte aligned, as Triton's launcher declares a torch tensor's
  (every buffer klab passes is its own allocation, 256-byte aligned). An integer is
  declared divisible by 16 only when it is a size variable the operation declares a
  multiple of 16 (klab's ladder then tries only such sizes); nothing else is specialized
  (no equal-to-1 assumptions), so the kernel is correct at every size klab's ladder tries.
- **The block**: ``num_warps * 32`` threads (the cubin requires exactly that), and the shared
  memory Triton reserves (``metadata.shared``) as dynamic shared memory.
- **The extra parameters**: recent Triton versions append pointer parameters that the
  launcher fills (a global scratch and a profiling scratch). Their number is read from the
  entry's own parameters in the PTX, never assumed from a version; each becomes a
  ``scratch`` buffer of bytes, as large as Triton's launcher would allocate (no bytes when
  Triton needs none).
- **The provenance**: ``generated_by`` in the manifest names Triton and its version, the
  Python file the kernel is in and the function, and every setting (constexprs, warps,
  stages, arch); klab hashes that file and puts it all in every receipt, beside the cubin's
  own hash.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from typing import Any, Dict, List, Optional, Sequence

from . import manifest as _manifest

__all__ = ["arch_of", "export", "entry_params", "triton_type"]

# klab dtypes as Triton spells a pointer to them, and scalars.
_TRITON_DTYPES = {
    "f16": "fp16",
    "bf16": "bf16",
    "f32": "fp32",
    "f64": "fp64",
    "i8": "i8",
    "u8": "u8",
    "i16": "i16",
    "u16": "u16",
    "i32": "i32",
    "u32": "u32",
    "i64": "i64",
    "u64": "u64",
}


def triton_type(param: str, op: Dict[str, Any]) -> str:
    """The Triton signature type of one of klab's ``params`` (``"x"`` a buffer of ``op``,
    ``"n:i32"`` a size or scalar)."""
    name, sep, dtype = param.partition(":")
    if sep:
        if dtype not in _TRITON_DTYPES:
            raise ValueError(f"{param}: klab has no {dtype}")
        return _TRITON_DTYPES[dtype]
    buffers = op.get("buffers", {})
    if name not in buffers:
        raise ValueError(f"{param}: not a buffer of the operation ({', '.join(buffers)})")
    return "*" + _TRITON_DTYPES[buffers[name]["dtype"]]


def entry_params(ptx: str, entry: str) -> int:
    """How many parameters `entry` takes, from its ``.entry`` in the PTX."""
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\((.*?)\)", ptx, re.S)
    if m is None:
        raise ValueError(f"the PTX has no .entry {entry}")
    return len(re.findall(r"\.param\s", m.group(1)))


def arch_of(env: Any) -> Optional[int]:
    """The device's architecture (90 for compute capability 9.0) from ``klab env --format
    json``'s report, which gives the capability as ``[major, minor]``; ``None`` without one."""
    device = env.get("device") if isinstance(env, dict) else None
    cc = device.get("compute_capability") if isinstance(device, dict) else None
    if isinstance(cc, str) and re.fullmatch(r"\d+\.\d+", cc):
        cc = cc.split(".")
    if isinstance(cc, (list, tuple)) and len(cc) == 2 and all(str(x).isdigit() for x in cc):
        return int(cc[0]) * 10 + int(cc[1])
    return None


def _device_arch() -> int:
    from . import env

    arch = arch_of(env())
    if arch is None:
        raise RuntimeError(
            "no device to compile for (klab env found none): pass arch=, e.g. arch=90 for an H100 or H200"
        )
    return arch


def _launchable(md: Any, name: str) -> None:
    """Refuse, in one line, a compiled kernel that needs more of its launch than klab gives:
    one CTA per cluster and a plain launch. Shared memory is not limited here: klab opts a
    kernel in to more than the default 48 KiB, as Triton's launcher does, and refuses a
    block past the device's opted-in limit when it plans the launch."""
    needs = []
    if int(getattr(md, "num_ctas", 1) or 1) != 1:
        needs.append(f"clusters of {md.num_ctas} CTAs")
    if getattr(md, "launch_cooperative_grid", False):
        needs.append("a cooperative launch")
    if getattr(md, "launch_pdl", False):
        needs.append("programmatic dependent launch")
    if getattr(md, "tensordesc_meta", None):
        needs.append("tensor descriptors (TMA) made by Triton's launcher")
    if needs:
        raise RuntimeError(f"{name}: klab cannot launch it as compiled: it needs {'; '.join(needs)}")


def _compile(fn, params, op, constexprs, num_warps, num_stages, arch):
    """`fn` compiled by Triton for ``sm_ARCH`` with klab's `params` as its signature, refused
    in one line when klab's launch cannot give it what it needs."""
    import triton
    from triton.backends.compiler import GPUTarget

    arg_names = list(fn.arg_names)
    unknown = [k for k in constexprs if k not in arg_names]
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: not arguments of {fn.__name__} ({', '.join(arg_names)})")
    runtime = [a for a in arg_names if a not in constexprs]
    if len(runtime) != len(params):
        raise ValueError(
            f"{fn.__name__} takes {len(runtime)} arguments besides its constexprs "
            f"({', '.join(runtime)}); params names {len(params)}"
        )
    types = iter([triton_type(p, op) for p in params])
    signature = {a: ("constexpr" if a in constexprs else next(types)) for a in arg_names}
    attrs, divisible = _divisibility(signature, arg_names, params, op)
    source = triton.compiler.ASTSource(
        fn=fn, signature=signature, constexprs=constexprs, attrs=attrs
    )
    compiled = triton.compile(
        source,
        target=GPUTarget("cuda", arch, 32),
        options={"num_warps": int(num_warps), "num_stages": int(num_stages)},
    )
    _launchable(compiled.metadata, fn.__name__)
    return compiled, attrs is not None, divisible


def _divisibility(signature: Dict[str, str], arg_names: List[str], params: Sequence[str],
                  op: Dict[str, Any]):
    """Triton's divisibility hints, in the form this Triton takes (``{(index,):
    [["tt.divisibility", 16]]}``, 3.3 on; else ``None``, no hints), and the size variables
    hinted.

    Triton's launcher hints every 16-byte-aligned pointer (a torch tensor's almost always
    is) and every integer 16 divides, and compiles a variant for them; its loads may then
    be vectorized. Every pointer klab passes is its own allocation (256-byte aligned), so
    pointers are hinted. An integer is hinted only when it is a size variable the operation
    declares a multiple of 16 (``sizes.cols = {"multiple": 16}``): klab's ladder then tries
    only such sizes, and no other integer is promised anything."""
    from triton.backends.compiler import BaseBackend

    if not callable(getattr(BaseBackend, "parse_attr", None)):
        return None, []
    runtime = iter(params)
    attrs, sizes = {}, []
    for i, a in enumerate(arg_names):
        if signature[a] == "constexpr":
            continue
        name = next(runtime).partition(":")[0]
        multiple = int(op.get("sizes", {}).get(name, {}).get("multiple", 1) or 1)
        if signature[a].startswith("*") or multiple % 16 == 0:
            attrs[(i,)] = [["tt.divisibility", 16]]
        if not signature[a].startswith("*") and multiple % 16 == 0:
            sizes.append(name)
    return attrs, sizes


def _launched_op(op: Dict[str, Any], md: Any, grid: Sequence[str], extras: int):
    """A copy of `op` launched as Triton compiled it: the grid, ``num_warps * 32`` threads,
    Triton's shared memory, and a byte scratch buffer per extra parameter (as large as
    Triton's launcher makes it). Returns it and the extra parameters' names."""
    op = json.loads(json.dumps(op))
    blocks = " * ".join(f"({g})" for g in grid)
    sizes = [getattr(md, "global_scratch_size", 0) or 0, getattr(md, "profile_scratch_size", 0) or 0]
    names = []
    for i in range(extras):
        per_block = sizes[i] if i < len(sizes) else 0
        names.append(f"triton_scratch_{i}")
        op.setdefault("buffers", {})[names[-1]] = {
            "dtype": "u8",
            "len": f"{per_block} * {blocks}" if per_block else "0",
            "role": "scratch",
        }
    op["grid"] = list(grid)
    op["block"] = [str(int(md.num_warps) * 32)]
    if md.shared:
        op["dynamic_shared_bytes"] = str(int(md.shared))
    return op, names


def export(
    fn: Any,
    *,
    name: str,
    params: Sequence[str],
    op: Dict[str, Any],
    grid: Sequence[str],
    out_dir: str,
    constexprs: Optional[Dict[str, Any]] = None,
    num_warps: int = 4,
    num_stages: int = 3,
    arch: Optional[int] = None,
    known_broken: Optional[str] = None,
    prediction: Optional[str] = None,
) -> str:
    """Compile `fn` and write ``NAME.cubin`` and the manifest ``NAME.toml`` (one kernel,
    named `name`, computing `op`) into `out_dir`; returns the manifest's path."""
    import triton

    constexprs = dict(constexprs or {})
    arch = _device_arch() if arch is None else int(arch)
    compiled, aligned, divisible = _compile(fn, params, op, constexprs, num_warps, num_stages, arch)
    md = compiled.metadata
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, name + ".cubin"), "wb") as f:
        f.write(compiled.asm["cubin"])
    extras = entry_params(compiled.asm["ptx"], md.name) - len(params)
    if extras < 0:
        raise RuntimeError(f"{md.name} takes fewer parameters than {fn.__name__} has: Triton changed")
    op, extra_names = _launched_op(op, md, grid, extras)

    settings = [f"{k}={v}" for k, v in sorted(constexprs.items())]
    settings += [f"num_warps={num_warps}", f"num_stages={num_stages}", f"arch=sm_{arch}"]
    if aligned:
        settings.append("pointers_aligned=16")
    if divisible:
        settings.append("divisible_by_16=" + ",".join(divisible))
    # Whether a * b + c may become one FMA: it changes the numbers (Triton's default moves).
    if hasattr(md, "enable_fp_fusion"):
        settings.append(f"enable_fp_fusion={bool(md.enable_fp_fusion)}")
    kernel: Dict[str, Any] = {
        "name": name,
        "entry": md.name,
        "operation": "declared",
        "params": list(params) + extra_names,
        "op": op,
        "generated_by": {
            "tool": f"triton {triton.__version__}",
            "source": os.path.relpath(inspect.getsourcefile(fn.fn), os.path.abspath(out_dir)),
            "function": fn.__name__,
            "settings": settings,
        },
    }
    if known_broken is not None:
        kernel["known_broken"] = known_broken
    if prediction is not None:
        kernel["prediction"] = prediction
    path = os.path.join(out_dir, name + ".toml")
    _manifest.write(path, {"source": name + ".cubin", "kernel": [kernel]})
    return path
