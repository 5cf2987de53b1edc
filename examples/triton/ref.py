"""The references of the Triton examples, in NumPy and double precision (klab.reference runs
them: `reference = { command = ["python3", "-m", "klab.reference", "ref.py:softmax"] }`),
written from the definitions, not from any kernel."""

import numpy as np


def softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layer_norm(x, *, eps):
    x = x.astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def matmul(a, b):
    # In float32: A's and B's f16 products are exact there, and at the index-overflow shape
    # (B whole, a sample of A's rows) float64 copies of B would take twice the memory.
    return a.astype(np.float32) @ b.astype(np.float32)
