"""Triton kernels for klab's Triton examples: a row softmax and a row layer norm, each
correct and with two labelled bugs, and a tiled matmul with one. Every kernel takes one program per row and walks the
row in chunks of BLOCK columns, so one compiled BLOCK serves every row length klab's ladder
tries (the ragged ones included): the chunk past the row's end is what the masks guard.
The matmul's masks guard the ragged edges of M, N and K the same way.
`export.py` compiles them for klab."""

import triton
import triton.language as tl


@triton.jit
def softmax(y_ptr, x_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = row.to(tl.int64) * cols
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + offs
        x = tl.load(x_ptr + base + c, mask=c < cols, other=float("-inf"))
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + offs
        x = tl.load(x_ptr + base + c, mask=c < cols, other=float("-inf"))
        s += tl.exp(x - row_max)
    total = tl.sum(s, axis=0)
    for start in range(0, cols, BLOCK):
        c = start + offs
        x = tl.load(x_ptr + base + c, mask=c < cols, other=float("-inf"))
        tl.store(y_ptr + base + c, tl.exp(x - row_max) / total, mask=c < cols)


@triton.jit
def softmax_tail_unmasked(y_ptr, x_ptr, rows, cols, BLOCK: tl.constexpr):
    # BUG: the sum's loads have no mask: a ragged row's sum takes in exp of the values past
    # its end (the next row's, or whatever follows the buffer on the last row).
    row = tl.program_id(0)
    base = row.to(tl.int64) * cols
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + offs
        x = tl.load(x_ptr + base + c, mask=c < cols, other=float("-inf"))
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        x = tl.load(x_ptr + base + start + offs)
        s += tl.exp(x - row_max)
    total = tl.sum(s, axis=0)
    for start in range(0, cols, BLOCK):
        c = start + offs
        x = tl.load(x_ptr + base + c, mask=c < cols, other=float("-inf"))
        tl.store(y_ptr + base + c, tl.exp(x - row_max) / total, mask=c < cols)


@triton.jit
def softmax_no_max(y_ptr, x_ptr, rows, cols, BLOCK: tl.constexpr):
    # BUG: exp(x) without subtracting the row's max: overflows to inf (then NaN) for the
    # logits the operation declares (up to 100).
    row = tl.program_id(0)
    base = row.to(tl.int64) * cols
    offs = tl.arange(0, BLOCK)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + offs
        x = tl.load(x_ptr + base + c, mask=c < cols, other=float("-inf"))
        s += tl.exp(x)
    total = tl.sum(s, axis=0)
    for start in range(0, cols, BLOCK):
        c = start + offs
        x = tl.load(x_ptr + base + c, mask=c < cols, other=float("-inf"))
        tl.store(y_ptr + base + c, tl.exp(x) / total, mask=c < cols)


@triton.jit
def layer_norm(y_ptr, x_ptr, rows, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = row.to(tl.int64) * cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + offs
        acc += tl.load(x_ptr + base + c, mask=c < cols, other=0.0)
    mean = tl.sum(acc, axis=0) / cols
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + offs
        x = tl.load(x_ptr + base + c, mask=c < cols, other=0.0)
        d = tl.where(c < cols, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        c = start + offs
        x = tl.load(x_ptr + base + c, mask=c < cols, other=0.0)
        tl.store(y_ptr + base + c, (x - mean) * rstd, mask=c < cols)


@triton.jit
def layer_norm_tail_in_variance(y_ptr, x_ptr, rows, cols, eps, BLOCK: tl.constexpr):
    # BUG: the variance sums (x - mean)^2 over the masked lanes too (x loaded as 0 there, so
    # each adds mean^2): a ragged row's variance is too large.
    row = tl.program_id(0)
    base = row.to(tl.int64) * cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + offs
        acc += tl.load(x_ptr + base + c, mask=c < cols, other=0.0)
    mean = tl.sum(acc, axis=0) / cols
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + offs
        x = tl.load(x_ptr + base + c, mask=c < cols, other=0.0)
        d = x - mean
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        c = start + offs
        x = tl.load(x_ptr + base + c, mask=c < cols, other=0.0)
        tl.store(y_ptr + base + c, (x - mean) * rstd, mask=c < cols)


@triton.jit
def layer_norm_one_chunk(y_ptr, x_ptr, rows, cols, eps, BLOCK: tl.constexpr):
    # BUG: the statistics are reduced over the first BLOCK columns only, not the whole row:
    # right while a row fits in one chunk, wrong for every longer row.
    row = tl.program_id(0)
    base = row.to(tl.int64) * cols
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + base + c, mask=c < cols, other=0.0)
    n = tl.minimum(cols, BLOCK)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(c < cols, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n + eps)
    for start in range(0, cols, BLOCK):
        cc = start + c
        xx = tl.load(x_ptr + base + cc, mask=cc < cols, other=0.0)
        tl.store(y_ptr + base + cc, (xx - mean) * rstd, mask=cc < cols)


# A tiled matmul, C = A @ B (f16 in, f32 out), one program per BM x BN tile of C. With
# BM = BN = 128, BK = 64 and several pipeline stages Triton stages 64 KiB or more of A and B
# in shared memory, past the 48 KiB a block gets by default: klab opts the kernel in, as
# Triton's launcher does.


@triton.jit
def matmul(c_ptr, a_ptr, b_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    # 64-bit row offsets: M * N passes 2^31 in klab's index-overflow case.
    a_rows = rm.to(tl.int64)[:, None] * K
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + rk
        a = tl.load(a_ptr + a_rows + k[None, :], mask=(rm[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k.to(tl.int64)[:, None] * N + rn[None, :],
                    mask=(k[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    c_at = c_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(c_at, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def matmul_k_tail_unmasked(c_ptr, a_ptr, b_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                           BK: tl.constexpr):
    # BUG: the loads are masked by row and column but not by K: when K is not a multiple of
    # BK the last step reads A's next row and B past its K rows into the sums.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_rows = rm.to(tl.int64)[:, None] * K
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + rk
        a = tl.load(a_ptr + a_rows + k[None, :], mask=rm[:, None] < M, other=0.0)
        b = tl.load(b_ptr + k.to(tl.int64)[:, None] * N + rn[None, :], mask=rn[None, :] < N, other=0.0)
        acc += tl.dot(a, b)
    c_at = c_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(c_at, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
