"""klab.triton: a @triton.jit kernel exported for klab. The PTX reading and the type mapping
need nothing; the export itself needs Triton (ahead-of-time compilation for sm_90 needs no
GPU), and is skipped, saying so, where Triton is not installed (the test command does not
install it: its wheel is about 280 MB). With Triton, every example of examples/triton is
exported and klab plans each manifest and calls its Python reference on the CPU
(`klab check --plan`)."""

import os
import subprocess
import sys
import tempfile
import unittest

import klab
from klab import triton as kt

try:
    import triton  # noqa: F401
except ImportError:  # pragma: no cover
    triton = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PTX = """
.visible .entry other(
	.param .u64 .ptr .global .align 1 other_param_0
)
.visible .entry scale(
	.param .u64 .ptr .global .align 1 scale_param_0,
	.param .u64 .ptr .global .align 1 scale_param_1,
	.param .u32 scale_param_2,
	.param .f32 scale_param_3,
	.param .u64 .ptr .global .align 1 scale_param_4,
	.param .u64 .ptr .global .align 1 scale_param_5
)
.reqntid 128
{
}
"""


class WithoutTriton(unittest.TestCase):
    def test_the_entrys_parameters_are_counted_from_its_own_ptx(self):
        self.assertEqual(kt.entry_params(PTX, "scale"), 6)
        self.assertEqual(kt.entry_params(PTX, "other"), 1)
        with self.assertRaises(ValueError):
            kt.entry_params(PTX, "scal")

    def test_the_devices_architecture_is_read_from_klab_envs_report(self):
        # As `klab env --format json` writes it (crates/klab-core DeviceFacts): a pair.
        self.assertEqual(kt.arch_of({"device": {"compute_capability": [9, 0]}}), 90)
        self.assertEqual(kt.arch_of({"device": {"compute_capability": [12, 1]}}), 121)
        self.assertEqual(kt.arch_of({"device": {"compute_capability": "8.6"}}), 86)
        for none in [{"device": None}, {}, None, {"device": {"compute_capability": [9]}}]:
            self.assertIsNone(kt.arch_of(none))

    def test_klab_params_become_triton_types(self):
        op = {"buffers": {"x": {"dtype": "bf16"}, "y": {"dtype": "f32"}}}
        self.assertEqual(
            [kt.triton_type(p, op) for p in ["y", "x", "n:i32", "eps:f32", "k:u64"]],
            ["*fp32", "*bf16", "i32", "fp32", "u64"],
        )
        for bad in ["z", "n:f8"]:
            with self.assertRaises(ValueError):
                kt.triton_type(bad, op)


class Launchable(unittest.TestCase):
    def test_a_kernel_needing_more_than_klabs_launch_is_refused_in_one_line(self):
        class Md:
            shared = 0
            num_ctas = 1
            launch_cooperative_grid = False
            launch_pdl = False
            tensordesc_meta = []

        kt._launchable(Md(), "k")
        # Past the default 48 KiB: klab opts the kernel in (a Triton matmul needs 64 KiB+).
        big = Md()
        big.shared = 100 * 1024
        kt._launchable(big, "k")
        big.num_ctas = 2
        big.launch_pdl = True
        with self.assertRaises(RuntimeError) as e:
            kt._launchable(big, "k")
        self.assertIn("clusters of 2 CTAs", str(e.exception))
        self.assertIn("programmatic dependent launch", str(e.exception))
        self.assertNotIn("shared memory", str(e.exception))


@unittest.skipIf(triton is None, "SKIPPED: Triton is not installed here")
class WithTriton(unittest.TestCase):
    def test_pointers_and_sizes_declared_multiples_of_16_get_divisibility_hints(self):
        sig = {"y": "*fp32", "x": "*fp32", "rows": "i32", "cols": "i32", "BLOCK": "constexpr"}
        names = ["y", "x", "rows", "cols", "BLOCK"]
        params = ["y", "x", "rows:i32", "cols:i32"]
        op = {"sizes": {"rows": {}, "cols": {"multiple": 32}}}
        attrs, sizes = kt._divisibility(sig, names, params, op)
        hint = [["tt.divisibility", 16]]
        self.assertEqual(attrs, {(0,): hint, (1,): hint, (3,): hint})
        self.assertEqual(sizes, ["cols"])
        # A multiple 16 does not divide promises nothing.
        op["sizes"]["cols"]["multiple"] = 8
        attrs, sizes = kt._divisibility(sig, names, params, op)
        self.assertEqual(attrs, {(0,): hint, (1,): hint})
        self.assertEqual(sizes, [])

    def test_every_example_exports_and_klab_plans_it_and_calls_its_reference(self):
        with tempfile.TemporaryDirectory() as out:
            env = dict(os.environ, TRITON_DEFAULT_FP_FUSION="1")
            # The reference runs as `python3` from PATH: this environment's.
            env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
            done = subprocess.run(
                [sys.executable, os.path.join(ROOT, "examples/triton/export.py"), out, "--arch", "90"],
                capture_output=True, text=True, env=env,
            )
            self.assertEqual(done.returncode, 0, done.stderr)
            manifests = done.stdout.split()
            self.assertEqual(len(manifests), 9, done.stdout)
            for m in manifests:
                r = subprocess.run(
                    [klab.find_klab_bin(), "check", m, "--plan"],
                    capture_output=True, text=True, env=env,
                )
                self.assertEqual(r.returncode, 0, f"{m}: {r.stderr}")
                # Each kernel walks a row (K) in steps its launch does not show (BLOCK = 1024
                # columns, BK = 64): the declared tile puts rows of one step and a bit, and of
                # two, in the ladder (on the H200 the one-chunk layer norm passed a ladder
                # that stopped at 512 columns).
                steps = ["K=65 ", "K=129 "] if "matmul" in m else ["cols=1025 ", "cols=2049 "]
                for shape in steps:
                    self.assertIn(shape, r.stdout, m)
            from klab import manifest

            k = manifest.load(os.path.join(out, "softmax_triton.toml"))["kernel"][0]
            self.assertEqual(k["op"]["block"], ["128"])  # num_warps = 4
            self.assertTrue(k["generated_by"]["tool"].startswith("triton "))
            self.assertIn("BLOCK=1024", k["generated_by"]["settings"])
            self.assertTrue(os.path.isfile(os.path.join(out, "softmax_triton.cubin")))
            # The matmul stages more than the default 48 KiB in shared memory: exported and
            # planned (klab opts it in when it launches).
            mm = manifest.load(os.path.join(out, "matmul_triton.toml"))["kernel"][0]
            self.assertGreater(int(mm["op"]["dynamic_shared_bytes"]), 48 * 1024)
            self.assertEqual(mm["op"]["grid"], ["ceil_div(M, 128)", "ceil_div(N, 128)"])


if __name__ == "__main__":
    unittest.main()
