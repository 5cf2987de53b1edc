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


NO_DRIVER = "error: no CUDA driver: libcuda could not be loaded\n"


def stand_in(folder, name, env, check, sanitize, plan=("check plan: k: 1 shape(s)\n", 0)):
    """A `klab` that answers `env`, `check`, `sanitize` and `check --plan` with (stdout, exit
    code) or (stdout, exit code, stderr); exit 1 says klab's no-driver error by default."""
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(
            textwrap.dedent(
                f"""\
                #!{sys.executable}
                import sys
                answers = {{"env": {env!r}, "check": {check!r}, "sanitize": {sanitize!r},
                           "plan": {plan!r}}}
                answer = answers["plan" if "--plan" in sys.argv else sys.argv[1]]
                out, code = answer[:2]
                sys.stdout.write(out)
                default = {NO_DRIVER!r} if code == 1 else ""
                sys.stderr.write(answer[2] if len(answer) > 2 else default)
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

    def test_without_a_gpu_klab_still_reads_the_manifest_and_runs_the_reference(self):
        # klab refuses a kernel name it does not know, and a reference that fails, before it
        # asks for a device: that is the test's error on every machine, never a skip.
        typo = "error: manifest k.toml: no kernel matches 'knrel' (it declares kernel)\n"
        ref = "error: k: the reference, run once on the CPU at n=1 before any device: boom\n"
        out, code = self.session(
            {
                "typo": (NO_GPU_ENV, ("", 1, typo), ("", 1, typo), ("", 1, typo)),
                "bad_ref": (NO_GPU_ENV, ("", 1, ref), ("", 1, NO_DRIVER), ("", 1, ref)),
            },
            """\
            def test_check_typo():
                check("k.toml:knrel", klab_bin=BIN["typo"])

            def test_sanitize_typo():
                sanitize("k.toml:knrel", klab_bin=BIN["typo"])

            def test_check_bad_reference():
                check("k.toml:k", klab_bin=BIN["bad_ref"])

            def test_sanitize_bad_reference():
                sanitize("k.toml:k", klab_bin=BIN["bad_ref"])
            """,
        )
        self.assertEqual(code, 1, out)
        self.assertIn("4 failed", out)
        self.assertNotIn("skipped", out)
        for says in [
            "KlabError: error: manifest k.toml: no kernel matches 'knrel'",
            "KlabError: error: k: the reference, run once on the CPU",
        ]:
            # Counted on pytest's "E" lines: the short summary repeats them only when the
            # terminal is wide enough, so a count over the whole output depends on COLUMNS.
            raised = [line for line in out.splitlines() if line.startswith("E ") and says in line]
            self.assertEqual(len(raised), 2, out)

    def test_under_w_error_no_gpu_is_a_skip_not_a_failure(self):
        # -W error makes a warning an exception: the NoGpuWarning must not turn a skip red.
        out, code = self.session(
            {"no_gpu": (NO_GPU_ENV, ("", 1), ("", 1), ("check plan: k: 1 shape(s)\n", 0))},
            """\
            def test_check():
                check("k.toml:k", klab_bin=BIN["no_gpu"])

            def test_sanitize():
                sanitize("k.toml:k", "--tools", "memcheck", klab_bin=BIN["no_gpu"])
            """,
            "-W", "error", "-rs",
        )
        self.assertEqual(code, 0, out)
        self.assertIn("2 skipped", out)
        self.assertIn("SKIPPED (no GPU): klab sanitize k.toml:k: no CUDA driver", out)

    def session(self, bins, tests, *pytest_args):
        """A pytest session over `tests` (their bodies), with BIN naming stand-ins made from
        `bins` (name: env, check, sanitize, plan answers); its output and exit code."""
        with tempfile.TemporaryDirectory() as d:
            paths = {name: stand_in(d, name, *answers) for name, answers in bins.items()}
            with open(os.path.join(d, "test_kernels.py"), "w") as f:
                f.write("from klab.testing import check, sanitize\n\n")
                f.write(f"BIN = {paths!r}\n\n\n")
                f.write(textwrap.dedent(tests))
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args, d],
                capture_output=True,
                text=True,
                cwd=d,
            )
            return done.stdout + done.stderr, done.returncode


NO_GPU_ENV = (
    json.dumps({"device": None, "device_error": "no CUDA driver: libcuda could not be loaded"}),
    1,
)


class CheckFailure(unittest.TestCase):
    """What a failed check says: klab's report, and its stderr lines about cases that ended
    their check process, which no report holds."""

    def test_a_case_that_killed_or_hung_the_check_is_named_beside_the_reports_failures(self):
        from klab import Report
        from klab.testing import check_failure

        # Kernel a: a case crashed its process, and the fresh process's report names another
        # failure. Kernel b: hung, so klab has no report of it at all.
        stderr = (
            "check a (declared), replay seed 1: 40 cases\n"
            "check a: FAIL: crashed: signal 11 (SIGSEGV) in n=65: random input seed 12\n"
            "klab check: a: the cases after it run in a fresh process\n"
            "check a: verdict: FAIL (1 case(s) ended their process and 0 failed before, named "
            "above; of the 12 after the last, run in a fresh one, 1 failed)\n"
            "check b: FAIL: hung: killed by the watchdog after 10 s (while running n=1)\n"
        )
        failed = Report(code=2, data=[CHECK_FAILED_A], stderr=stderr)
        said = check_failure("klab check k.toml", failed)
        self.assertIn("a: 1 of 3 cases fail", said)
        self.assertIn("first at [i 32]: got NaN", said)
        self.assertIn("check a: FAIL: crashed: signal 11 (SIGSEGV) in n=65", said)
        self.assertIn("check a: verdict: FAIL (1 case(s) ended their process", said)
        self.assertIn("b: no report (its check process hung or died)", said)
        self.assertIn("check b: FAIL: hung: killed by the watchdog after 10 s", said)
        # One kernel whose only process hung: no report (null), its line all the same.
        one = check_failure("klab check k.toml:b", Report(code=2, data=None, stderr=stderr))
        self.assertIn("check b: FAIL: hung", one)


CHECK_FAILED_A = dict(CHECK_FAILED, kernel="a")


if __name__ == "__main__":
    unittest.main()
