"""Compile the Triton examples for klab: `python3 examples/triton/export.py OUT [--arch 90]`
writes OUT/NAME.cubin and OUT/NAME.toml for each kernel (the correct ones and the labelled
bugs: softmax, layer norm, matmul), and OUT/softmax_cuda.toml, the CUDA softmax over the
same operation. Then:

    klab check OUT/*.toml                    # the kill matrix: every bug rejected
    klab sanitize OUT/softmax_triton.toml
    klab rounds OUT/softmax_cuda.toml:softmax_cuda OUT/softmax_triton.toml:softmax_triton

The settings are fixed here, as an autotuner's choice would be, and every receipt names them
(`generated_by`)."""

import argparse
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import kernels  # noqa: E402
import ops  # noqa: E402
from klab import manifest  # noqa: E402
from klab import triton as kt  # noqa: E402

BLOCK = 1024
SETTINGS = {"constexprs": {"BLOCK": BLOCK}, "num_warps": 4, "num_stages": 3}

SOFTMAX = [
    ("softmax_triton", kernels.softmax, None),
    ("softmax_tail_unmasked", kernels.softmax_tail_unmasked,
     "the sum's loads have no mask: a ragged row's sum takes in values past its end"),
    ("softmax_no_max", kernels.softmax_no_max,
     "exp(x) without the row's max subtracted overflows for logits above about 88.7"),
]
LAYER_NORM = [
    ("layer_norm_triton", kernels.layer_norm, None),
    ("layer_norm_tail_in_variance", kernels.layer_norm_tail_in_variance,
     "the variance sums the masked lanes too: a ragged row's variance is too large"),
    ("layer_norm_one_chunk", kernels.layer_norm_one_chunk,
     "the statistics are reduced over the first BLOCK columns only"),
]
MATMUL = [
    ("matmul_triton", kernels.matmul, None),
    ("matmul_k_tail_unmasked", kernels.matmul_k_tail_unmasked,
     "the loads are not masked by K: a ragged K's last step sums values past each row"),
]
# 128 x 128 tiles of C, 64 of K per step, 3 stages: past the default 48 KiB of shared
# memory per block (64 KiB as Triton 3.6 compiles it for sm_90).
MATMUL_SETTINGS = {"constexprs": {"BM": 128, "BN": 128, "BK": 64}, "num_warps": 8,
                   "num_stages": 3}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--arch", type=int, default=None, help="e.g. 90 (default: the device's)")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    ref = os.path.relpath(os.path.join(HERE, "ref.py"), os.path.abspath(a.out))
    for group, op, params, settings in [
        (SOFTMAX, ops.softmax(ref, BLOCK), ["y", "x", "rows:i32", "cols:i32"], SETTINGS),
        (LAYER_NORM, ops.layer_norm(ref, BLOCK), ["y", "x", "rows:i32", "cols:i32", "eps:f32"],
         SETTINGS),
        (MATMUL, ops.matmul(ref, MATMUL_SETTINGS["constexprs"]["BK"]),
         ["c", "a", "b", "M:i32", "N:i32", "K:i32"], MATMUL_SETTINGS),
    ]:
        for name, fn, bug in group:
            path = kt.export(fn, name=name, params=params, op=op, grid=op["grid"],
                             out_dir=a.out, arch=a.arch, known_broken=bug, **settings)
            print(path)
    # The CUDA softmax, compiled by klab (NVRTC), over the same operation.
    shutil.copy(os.path.join(HERE, "softmax.cu"), a.out)
    cuda = dict(ops.softmax(ref, BLOCK), block=["256"])
    path = os.path.join(a.out, "softmax_cuda.toml")
    manifest.write(path, {"source": "softmax.cu", "kernel": [{
        "name": "softmax_cuda", "entry": "softmax_cuda", "operation": "declared",
        "params": ["y", "x", "rows:i32", "cols:i32"], "op": cuda}]})
    print(path)


if __name__ == "__main__":
    main()
