"""The operations the Triton examples compute, as klab's declared-operation tables (the
same for the Triton kernels and the CUDA softmax): sizes, buffers, rules and the Python
reference. `reference` is the path of ref.py relative to the manifest that will hold it."""

from klab import manifest


def softmax(reference: str) -> dict:
    return {
        "grid": ["rows"],
        "useful_bytes": "2 * rows * cols * 4",
        "flops": "5 * rows * cols",
        "reference": manifest.python_reference(f"{reference}:softmax"),
        "slices": "rows",
        "sizes": {"rows": {"values": [1, 3, 64]}, "cols": {}},
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


def layer_norm(reference: str) -> dict:
    return {
        "grid": ["rows"],
        "useful_bytes": "2 * rows * cols * 4",
        "flops": "8 * rows * cols",
        "reference": manifest.python_reference(f"{reference}:layer_norm"),
        "slices": "rows",
        "sizes": {"rows": {"values": [1, 3, 64]}, "cols": {}},
        "buffers": {
            "x": {"dtype": "f32", "len": "rows * cols", "role": "in", "shape": ["rows", "cols"],
                  "range": [-4.0, 4.0]},
            "y": {"dtype": "f32", "len": "rows * cols", "role": "out", "shape": ["rows", "cols"],
                  "axes": ["row", "col"], "compare": {"allclose": {"atol": 1e-4, "rtol": 1e-4}}},
        },
        "scalars": {"eps": {"type": "f32", "values": [1e-5, 1e-3]}},
        "bench": {"rows": 16384, "cols": 4096},
    }
