"""klab.reference: a Python function as a command reference. Each test plays klab's side of
one call (the folder with the inputs and params.json, as klab writes them) and runs
``python -m klab.reference`` in a process, as klab does; the last tests run klab itself,
which calls the reference once on the CPU before it asks for a GPU (``klab check --plan``).
They need NumPy, which scripts/test installs into the test environment; without it they are
skipped, and say so."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

import klab
from klab import manifest

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None

NEEDS_NUMPY = unittest.skipIf(np is None, "SKIPPED: NumPy is not installed here")

REF_PY = '''
import numpy as np

def scale(x, *, a):
    return a * x.astype(np.float64)

def two(x, s, *, rows):
    return {"y": x * 2, "s": s + np.arange(rows, dtype=np.int32)}

def pair(x, s, **kw):
    return (x * 2, s + 1)

def in_place(x, s):
    s += 7

def forgot_return(x, s):
    s = s + 7

def sort_in_place(s):
    s.sort()

def relu_in_place(x):
    np.maximum(x, 0, out=x)

def wants_y(x, y):
    return x

def no_ints(x):
    return []

def floats_for_ints(x, s):
    return x * 2, s * 0.5

def out_of_range(x, s):
    return x * 2, s.astype(np.int64) + 2**40

def wrong_shape(x, *, a):
    return x.T

def raises(x):
    raise ValueError("the reference is unhappy")

def wants_more(x, alpha):
    return x

def just_bf16(x):
    return x

def transposed(x):
    return x.T

def flat(x):
    return x.ravel()

def torch_scale(x, *, a):
    import torch
    assert isinstance(x, torch.Tensor), type(x)
    return (x.double() * a).to(torch.bfloat16)
'''


def call(folder, function, buffers, inputs, values, extra=()):
    """Play klab: write the inputs and params.json, run the reference there."""
    call_dir = os.path.join(folder, "call")
    os.makedirs(call_dir, exist_ok=True)
    for name, a in inputs.items():
        np.save(os.path.join(call_dir, name + ".npy"), a)
    params = {"values": values, "dtypes": {k: "i32" for k in values}, "buffers": buffers}
    with open(os.path.join(call_dir, "params.json"), "w") as f:
        json.dump(params, f)
    env = dict(os.environ, KLAB_REF_DIR=call_dir)
    done = subprocess.run(
        [sys.executable, "-m", "klab.reference", function, *extra],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    return done, call_dir


def buf(name, dtype, shape, role):
    return {"name": name, "dtype": dtype, "shape": list(shape), "role": role}


@NEEDS_NUMPY
class TheRunner(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        with open(os.path.join(self.dir, "ref.py"), "w") as f:
            f.write(REF_PY)
        self.x = (np.arange(15, dtype=np.float32) / 3).reshape(3, 5)
        self.s = np.array([10, 20, 30], dtype=np.int32)
        self.three = [
            buf("x", "f32", (3, 5), "in"),
            buf("y", "f32", (3, 5), "out"),
            buf("s", "i32", (3,), "inout"),
        ]

    def tearDown(self):
        self.tmp.cleanup()

    def run_three(self, function):
        return call(self.dir, function, self.three, {"x": self.x, "s": self.s}, {"rows": 3})

    def read(self, call_dir, name):
        return np.load(os.path.join(call_dir, name + ".npy"))

    def test_a_double_result_is_rounded_once_to_the_buffers_dtype(self):
        a = float(np.float32(0.1))
        done, d = call(
            self.dir,
            "ref.py:scale",
            [buf("x", "f32", (3, 5), "in"), buf("y", "f32", (3, 5), "out")],
            {"x": self.x},
            {"a": a, "rows": 3, "cols": 5},
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        y = self.read(d, "y")
        self.assertEqual((y.dtype.str, y.shape), ("<f4", (3, 5)))
        want = (a * self.x.astype(np.float64)).astype(np.float32)
        self.assertTrue(np.array_equal(y.view(np.uint32), want.view(np.uint32)))

    def test_several_outputs_by_name_by_order_and_in_place(self):
        for function, s in [
            ("ref.py:two", [10, 21, 32]),
            ("ref.py:pair", [11, 21, 31]),
            ("ref.py:in_place", [17, 27, 37]),
        ]:
            done, d = self.run_three(function)
            if function == "ref.py:in_place":
                # No y: an out buffer must come back.
                self.assertNotEqual(done.returncode, 0)
                self.assertIn("returned no y (an out buffer)", done.stderr)
                continue
            self.assertEqual(done.returncode, 0, f"{function}: {done.stderr}")
            self.assertEqual(self.read(d, "s").tolist(), s, function)
            self.assertTrue(np.array_equal(self.read(d, "y"), self.x * 2), function)

    def test_an_inout_changed_in_place_is_written_back(self):
        done, d = call(
            self.dir,
            "ref.py:in_place",
            [buf("x", "f32", (3, 5), "in"), buf("s", "i32", (3,), "inout")],
            {"x": self.x, "s": self.s},
            {},
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.read(d, "s").tolist(), [17, 27, 37])

    def test_what_klab_would_misread_is_one_line(self):
        for function, says in [
            ("ref.py:floats_for_ints", "s: returned float64 values for a i32 buffer"),
            ("ref.py:out_of_range", "outside i32"),
            ("ref.py:raises", "ValueError: the reference is unhappy"),
            ("ref.py:wants_more", "takes alpha, which is not a buffer, size or scalar"),
            ("ref.py:nope", "has no function nope"),
            ("missing.py:f", "missing.py: no such file"),
            ("ref.py:wants_y", "takes y, an out buffer"),
        ]:
            done, _ = self.run_three(function)
            self.assertNotEqual(done.returncode, 0, function)
            last = done.stderr.strip().splitlines()[-1]
            self.assertIn(says, last, f"{function}: {done.stderr}")
        done, _ = call(
            self.dir,
            "ref.py:wrong_shape",
            [buf("x", "f32", (3, 5), "in"), buf("y", "f32", (3, 4), "out")],
            {"x": self.x},
            {"a": 1.0},
        )
        self.assertIn("returned shape (5, 3) (15 elements); the buffer is (3, 4)", done.stderr)

    def test_none_that_changed_nothing_is_refused_but_for_one_element(self):
        # One element sorted is its own answer, and every check starts at n=1: taken.
        inout = [buf("s", "i32", (1,), "inout")]
        done, d = call(self.dir, "ref.py:sort_in_place", inout, {"s": np.array([5], dtype=np.int32)}, {})
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.read(d, "s").tolist(), [5])
        # More elements left as they were: a forgotten return looks the same (a kernel that
        # does nothing would pass against it), so it is refused, saying what to do.
        given = np.array([0.5, 2.0, 3.25], dtype=np.float32)
        inout = [buf("x", "f32", given.shape, "inout")]
        done, _ = call(self.dir, "ref.py:relu_in_place", inout, {"x": given}, {})
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("returned None and changed no inout buffer in place (x)", done.stderr)
        self.assertIn("return the arrays where the inputs may already be the answer", done.stderr)
        # Changed in place: taken.
        mixed = np.array([-0.5, 2.0, -3.25], dtype=np.float32)
        done, d = call(self.dir, "ref.py:relu_in_place", inout, {"x": mixed}, {})
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.read(d, "x").tolist(), [0.0, 2.0, 0.0])

    def test_none_with_an_out_buffer_is_refused_naming_it(self):
        # A forgotten return cannot pass for an answer where an out buffer would be missing.
        done, _ = self.run_three("ref.py:forgot_return")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("returned no y (an out buffer)", done.stderr.strip().splitlines()[-1])

    def test_an_empty_integer_output_is_no_error(self):
        done, d = call(
            self.dir,
            "ref.py:no_ints",
            [buf("x", "f32", (0,), "in"), buf("k", "i32", (0,), "out")],
            {"x": np.zeros(0, dtype=np.float32)},
            {},
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.read(d, "k").dtype.str, "<i4")

    def test_a_result_in_another_shape_of_the_right_size_is_refused_a_flat_one_taken(self):
        # klab's contract for a .npy: the declared shape or the flat one. A transposed
        # result taken in C order would scramble the values.
        two = [buf("x", "f32", (3, 5), "in"), buf("y", "f32", (3, 5), "out")]
        done, _ = call(self.dir, "ref.py:transposed", two, {"x": self.x}, {})
        self.assertNotEqual(done.returncode, 0)
        self.assertIn(
            "y: returned shape (5, 3) (15 elements); the buffer is (3, 5) (15 elements)",
            done.stderr,
        )
        done, d = call(self.dir, "ref.py:flat", two, {"x": self.x}, {})
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(np.array_equal(self.read(d, "y"), self.x))

    def test_bf16_arrives_as_float32_and_leaves_rounded_to_nearest_even(self):
        # bf16 bits: 1.0, 1.0078125 (1 + 2^-7), -2.0 and a quiet NaN.
        bits = np.array([0x3F80, 0x3F81, 0xC000, 0x7FC0], dtype="<u2")
        done, d = call(
            self.dir,
            "ref.py:just_bf16",
            [buf("x", "bf16", (4,), "in"), buf("y", "bf16", (4,), "out")],
            {"x": bits},
            {},
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.read(d, "y").dtype.str, "<u2")
        self.assertEqual(self.read(d, "y").tolist(), bits.tolist())

    def test_bf16_rounding_from_double_has_no_double_rounding(self):
        from klab.reference import _bf16_bits

        one = 1.0
        ulp = 2.0**-7  # bf16's unit at 1.0
        cases = [
            (one + ulp / 2, 0x3F80),  # a tie: to even (1.0)
            (one + 3 * ulp / 2, 0x3F82),  # a tie: to even (1 + 2 ulp)
            (one + ulp / 2 + 2.0**-40, 0x3F81),  # just past the tie: up, though f32 would tie
            (one + ulp / 2 - 2.0**-40, 0x3F80),
            (-(one + ulp / 2 + 2.0**-40), 0xBF81),
            (float("inf"), 0x7F80),
            (0.0, 0x0000),
            (-0.0, 0x8000),  # the sign of zero kept
        ]
        got = _bf16_bits(np.array([v for v, _ in cases], dtype=np.float64)).tolist()
        self.assertEqual(got, [b for _, b in cases])


try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


@NEEDS_NUMPY
@unittest.skipIf(torch is None, "SKIPPED: torch is not installed here")
class WithTorch(unittest.TestCase):
    """`--tensors torch`: tensors in, a bf16 tensor out, rounded as klab.reference rounds
    (torch's own bf16 cast is to nearest even too). Not run where torch is missing (the test
    command does not install it); scripts/gpu-triton-evidence runs it on the GPU machine."""

    def test_tensors_arrive_and_a_bf16_tensor_is_written_as_its_bits(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "ref.py"), "w") as f:
                f.write(REF_PY)
            x = (np.arange(8, dtype=np.float32) - 3.3).astype(np.float32)
            done, call_dir = call(
                d,
                "ref.py:torch_scale",
                [buf("x", "f32", (8,), "in"), buf("y", "bf16", (8,), "out")],
                {"x": x},
                {"a": 0.7},
                extra=("--tensors", "torch"),
            )
            self.assertEqual(done.returncode, 0, done.stderr)
            got = np.load(os.path.join(call_dir, "y.npy"))
            want = (torch.from_numpy(x).double() * 0.7).to(torch.bfloat16).view(torch.int16)
            self.assertEqual(got.dtype.str, "<u2")
            self.assertEqual(got.tolist(), (want.numpy().astype(np.uint16)).tolist())


@NEEDS_NUMPY
class ThroughKlab(unittest.TestCase):
    """klab calls the function once on the CPU before it asks for a device: `klab check
    --plan` runs that call on the smallest shape of the ladder, on this machine."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        with open(os.path.join(self.dir, "k.cu"), "w") as f:
            f.write(
                'extern "C" __global__ void k(float* y, const float* x, int n) '
                "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0f * x[i]; }\n"
            )

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, body):
        with open(os.path.join(self.dir, "ref.py"), "w") as f:
            f.write(textwrap.dedent(body))
        m = {
            "source": "k.cu",
            "kernel": [
                {
                    "name": "k",
                    "entry": "k",
                    "operation": "declared",
                    "params": ["y", "x", "n:i32"],
                    "op": {
                        "grid": ["ceil_div(n, 256)"],
                        "block": ["256"],
                        "useful_bytes": "8 * n",
                        # The environment's own interpreter: it has klab and NumPy.
                        "reference": manifest.python_reference(
                            "ref.py:double", python=sys.executable
                        ),
                        "sizes": {"n": {}},
                        "buffers": {
                            "x": {"dtype": "f32", "len": "n", "role": "in"},
                            "y": {"dtype": "f32", "len": "n", "role": "out", "compare": {"ulp": 0}},
                        },
                    },
                }
            ],
        }
        path = os.path.join(self.dir, "k.toml")
        manifest.write(path, m)
        return klab.run(["check", f"{path}:k", "--plan"])

    def test_a_function_klab_can_call_passes_the_cpu_run(self):
        done = self.check(
            """
            import numpy as np
            def double(x, *, n):
                assert x.shape == (n,) and x.dtype == np.float32
                return 2.0 * x.astype(np.float64)
            """
        )
        self.assertEqual(done.returncode, klab.EXIT_OK, done.stdout + done.stderr)

    def test_a_function_that_raises_or_returns_the_wrong_length_stops_klab_in_one_line(self):
        for body, says in [
            ("def double(x):\n    raise ValueError('no')\n", "ValueError: no"),
            ("def double(x):\n    return x[:-1]\n", "the buffer is"),
        ]:
            done = self.check(body)
            self.assertEqual(done.returncode, klab.EXIT_ERROR, done.stdout + done.stderr)
            self.assertIn(says, done.stderr)
            self.assertIn("checked on the CPU before any device", done.stderr)


class TheTable(unittest.TestCase):
    def test_the_reference_table_names_the_runner(self):
        self.assertEqual(
            manifest.python_reference("ref.py:f"),
            {"command": ["python3", "-m", "klab.reference", "ref.py:f"]},
        )
        self.assertEqual(
            manifest.python_reference("m:f", tensors="torch", device="cuda", timeout_s=30),
            {
                "command": {
                    "argv": [
                        "python3", "-m", "klab.reference", "m:f",
                        "--tensors", "torch", "--device", "cuda",
                    ],
                    "timeout_s": 30,
                }
            },
        )
        with self.assertRaises(ValueError):
            manifest.python_reference("m:f", device="cuda")


if __name__ == "__main__":
    unittest.main()
