"""The operations the Triton examples compute, as klab's declared-operation tables (the
same for the Triton kernels and the CUDA softmax): sizes, buffers, rules and the Python
reference. `reference` is the path of ref.py relative to the manifest that will hold it;
`block` (and the matmul's `bk`) is the step the Triton kernels walk a row (K) in, declared as
the size's tile: one program per row gives the launch no sign of it, so without it klab's
ladder would stay below one step and never run a row of two."""

from klab import manifest


def softmax(reference: str, block: int) -> dict:
    return {
        "grid": ["rows"],
        "useful_bytes": "2 * rows * cols * 4",
        "flops": "5 * rows * cols",
        "reference": manifest.python_reference(f"{reference}:softmax"),
        "slices": "rows",
        "sizes": {"rows": {"values": [1, 3, 64]}, "cols": {"tile": block}},
        "buffers": {
            # Logits up to 100 in magnitude: exp overflows float32 from about 88.7, which is
            # why a softmax subtracts the row's max.
            "x": {"dtype": "f32", "len": "rows * cols", "role": "in", "shape": ["rows", "cols"],
                  "range": [-100.0, 100.0]},
            "y": {"dtype": "f32", "len": "rows * cols", "role": "out", "shape": ["rows", "cols"],
                  "axes": ["row", "col"], "compare": {"allclose": {"atol": 1e-6, "rtol": 1e-4}}},
        },
        "bench": {"rows": 16384, "cols": 4096},
    }


def layer_norm(reference: str, block: int) -> dict:
    return {
        "grid": ["rows"],
        "useful_bytes": "2 * rows * cols * 4",
        "flops": "8 * rows * cols",
        "reference": manifest.python_reference(f"{reference}:layer_norm"),
        "slices": "rows",
        "sizes": {"rows": {"values": [1, 3, 64]}, "cols": {"tile": block}},
        "buffers": {
            "x": {"dtype": "f32", "len": "rows * cols", "role": "in", "shape": ["rows", "cols"],
                  "range": [-4.0, 4.0]},
            "y": {"dtype": "f32", "len": "rows * cols", "role": "out", "shape": ["rows", "cols"],
                  "axes": ["row", "col"], "compare": {"allclose": {"atol": 1e-4, "rtol": 1e-4}}},
        },
        "scalars": {"eps": {"type": "f32", "values": [1e-5, 1e-3]}},
        "bench": {"rows": 16384, "cols": 4096},
    }


def matmul(reference: str, bk: int) -> dict:
    """C = A @ B with A M x K and B K x N in f16 and C in f32. The grid is the kernel's own
    (BM x BN tiles of C); K is held to 4096 so the index-overflow case grows C's rows and
    columns (C passes 2^31 elements) and its reference computes a sample of C's rows with B
    whole (`slices = "M"`)."""
    return {
        "grid": ["ceil_div(M, 128)", "ceil_div(N, 128)"],
        "useful_bytes": "2 * M * K + 2 * K * N + 4 * M * N",
        "flops": "2 * M * N * K",
        "reference": manifest.python_reference(f"{reference}:matmul"),
        "slices": "M",
        "sizes": {"M": {}, "N": {}, "K": {"max": 4096, "tile": bk}},
        "buffers": {
            "a": {"dtype": "f16", "len": "M * K", "role": "in", "shape": ["M", "K"],
                  "range": [-1.0, 1.0]},
            "b": {"dtype": "f16", "len": "K * N", "role": "in", "shape": ["K", "N"],
                  "range": [-1.0, 1.0]},
            # f16 products are exact in f32, but the tensor cores sum them in another order
            # and rounding than the reference: an error the size of the terms, not of the
            # result. On the H200 a tolerance relative to the result (allclose 1e-3) failed
            # this correct kernel where large-magnitude inputs cancel (2042.0 for 2044.7 at
            # K = 257); scaled-sum bounds the error by sum |a_ik b_kj| instead.
            "c": {"dtype": "f32", "len": "M * N", "role": "out", "shape": ["M", "N"],
                  "axes": ["row", "col"], "compare": {"scaled-sum": "K"}},
        },
        "bench": {"M": 4096, "N": 4096, "K": 4096},
    }
