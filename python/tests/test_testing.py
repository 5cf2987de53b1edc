"""klab.testing: klab's gates as pytest tests. A real pytest session runs in a process of its
own over a test file that calls the helpers with stand-in klab binaries: one on a machine
with a GPU whose check and sanitizer runs fail (their JSON reports as klab writes them), one
whose gates pass, and one on a machine without a GPU. Needs pytest, which scripts/test
installs into the test environment; without it the test is skipped, and says so."""

import json
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest

try:
    import pytest  # noqa: F401
except ImportError:  # pragma: no cover
    pytest = None

DEVICE = {"name": "NVIDIA H200", "uuid": "GPU-0"}

CHECK_FAILED = {
    "kernel": "user_drop_tail",
    "operation": "declared",
    "known_broken": None,
    "seed": 7,
    "cases": [
        {"case": "n=1: exact input, poison 0xff", "n": 1, "pass": True, "detail": "y: PASS"},
        {
            "case": "n=33: exact input, poison 0xff",
            "n": 33,
            "pass": False,
            "detail": "y: FAIL 1/33 failures (ulp <= 0, NaN fails); max abs inf, max rel 0, "
            "max ulp 0; first at [i 32]: got NaN (0xffffffff), want 6.4 (0x40cccccd)",
        },
        {"case": "n=4097: index overflow", "n": 4097, "pass": True, "detail": "skipped",
         "skipped": True},
    ],
}

SANITIZE_FAILED = {
    "kernels": [
        {
            "kernel": "user_race",
            "known_broken": None,
            "sizes": [33, 64],
            "verdict": "FAIL: racecheck found errors",
            "runs": [
                {"tool": "memcheck", "timed_out": False, "report": {"tool": "memcheck", "findings": []}},
                {
                    "tool": "racecheck",
                    "timed_out": False,
                    "report": {
                        "tool": "racecheck",
                        "findings": [
                            {
                                "kind": "shared-race",
                                "raw": "========= Error: Race reported between Write access at "
                                "k.cu:12 in k and Read access at k.cu:14 in k [248 hazards]",
                            }
                        ],
                    },
                },
            ],
        }
    ],
    "watchdog_s": 900,
    "reports": "artifacts/sanitize/run-01",
}


def stand_in(folder, name, env, check, sanitize):
    """A `klab` that answers `env`, `check` and `sanitize` with (stdout, exit code)."""
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(
            textwrap.dedent(
                f"""\
                #!{sys.executable}
                import sys
                answers = {{"env": {env!r}, "check": {check!r}, "sanitize": {sanitize!r}}}
                out, code = answers[sys.argv[1]]
                sys.stdout.write(out)
                if code == 1:
                    sys.stderr.write("error: no CUDA driver: libcuda could not be loaded\\n")
                sys.exit(code)
                """
            )
        )
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


@unittest.skipIf(pytest is None, "SKIPPED: pytest is not installed here")
class UnderPytest(unittest.TestCase):
    def test_a_failed_gate_fails_a_passed_one_passes_and_no_gpu_skips_loudly(self):
        with tempfile.TemporaryDirectory() as d:
            gpu = (json.dumps({"device": DEVICE}), 0)
            failing = stand_in(
                d, "failing", gpu, (json.dumps(CHECK_FAILED), 2), (json.dumps(SANITIZE_FAILED), 2)
            )
            passing = stand_in(
                d, "passing", gpu,
                (json.dumps(dict(CHECK_FAILED, cases=CHECK_FAILED["cases"][:1])), 0),
                (json.dumps({"kernels": [], "watchdog_s": 900, "reports": "r"}), 0),
            )
            no_gpu = stand_in(
                d, "no_gpu",
                (json.dumps({"device": None, "device_error": "no CUDA driver: libcuda could not be loaded"}), 1),
                ("", 1), ("", 1),
            )
            with open(os.path.join(d, "test_kernels.py"), "w") as f:
                f.write(
                    textwrap.dedent(
                        f"""\
                        from klab.testing import check, sanitize

                        def test_check_fails():
                            check("k.toml:user_drop_tail", klab_bin={failing!r})

                        def test_sanitize_fails():
                            sanitize("k.toml:user_race", klab_bin={failing!r})

                        def test_check_passes():
                            r = check("k.toml:user_drop_tail", "--sizes", "1", klab_bin={passing!r})
                            assert r.passed

                        def test_sanitize_passes():
                            assert sanitize("k.toml:k", klab_bin={passing!r}).passed

                        def test_no_gpu():
                            check("k.toml:k", klab_bin={no_gpu!r})
                        """
                    )
                )
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", d],
                capture_output=True,
                text=True,
                cwd=d,
            )
            out = done.stdout + done.stderr
            self.assertEqual(done.returncode, 1, out)  # pytest: some tests failed
            self.assertIn("2 failed, 2 passed, 1 skipped", out)
            # klab's verdict, as klab states it: the case, the first bad index, both values.
            self.assertIn("klab check k.toml:user_drop_tail: FAIL", out)
            self.assertIn("user_drop_tail: 1 of 3 cases fail", out)
            self.assertIn(
                "n=33: exact input, poison 0xff: y: FAIL 1/33 failures", out
            )
            self.assertIn("first at [i 32]: got NaN (0xffffffff), want 6.4 (0x40cccccd)", out)
            # The sanitizer's finding in the tool's own words.
            self.assertIn("user_race: FAIL: racecheck found errors", out)
            self.assertIn("racecheck: 1 finding(s); first: ========= Error: Race reported", out)
            # The skip says why in pytest's warnings summary, without -rs.
            self.assertIn("NoGpuWarning: SKIPPED (no GPU): klab check k.toml:k: no CUDA driver", out)


if __name__ == "__main__":
    unittest.main()
