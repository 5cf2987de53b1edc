"""The klab wheel as a user gets it: installed into a fresh virtual environment by
scripts/test, then these tests run there with that environment's Python. No GPU is needed:
`klab model` runs anywhere, and a gate failure is played by a stand-in binary."""

import importlib.metadata
import os
import stat
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import unittest

import klab


def stand_in(folder: str, stdout: str, code: int) -> str:
    """A `klab` that prints `stdout` and exits `code`, whatever it is asked."""
    path = os.path.join(folder, "klab")
    with open(path, "w") as f:
        f.write(
            textwrap.dedent(
                f"""\
                #!{sys.executable}
                import sys
                sys.stdout.write({stdout!r})
                sys.stderr.write("stand-in klab\\n")
                sys.exit({code})
                """
            )
        )
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


class TheWheel(unittest.TestCase):
    def test_the_binary_is_the_environments(self):
        path = klab.find_klab_bin()
        self.assertEqual(os.path.dirname(path), sysconfig.get_path("scripts"))
        self.assertTrue(path.startswith(sys.prefix), path)
        self.assertTrue(os.access(path, os.X_OK))

    def test_the_binary_and_the_package_have_one_version(self):
        done = klab.run(["--version"])
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), f"klab {importlib.metadata.version('klab')}")

    def test_env_is_klabs_report_or_why_it_gave_none(self):
        report = klab.env()
        self.assertIn("klab_version", report)
        if report["device"] is None:
            self.assertTrue(report["device_error"])
        with tempfile.TemporaryDirectory() as d:
            said = klab.env(klab_bin=stand_in(d, "not json", 1))
            self.assertEqual(said, {"device": None, "device_error": "stand-in klab"})

    def test_python_m_klab_runs_the_binary(self):
        done = subprocess.run(
            [sys.executable, "-m", "klab", "--version"], capture_output=True, text=True
        )
        self.assertEqual((done.returncode, done.stdout.strip().split()[0]), (0, "klab"))
        done = subprocess.run(
            [sys.executable, "-m", "klab", "no-such-command"], capture_output=True, text=True
        )
        self.assertEqual(done.returncode, klab.EXIT_ERROR)
        self.assertIn("no-such-command", done.stderr)


class RunJson(unittest.TestCase):
    def test_a_report_is_parsed(self):
        # The transpose lab's address model: no GPU needed.
        model = klab.run_json("model")
        self.assertTrue(model.passed)
        self.assertEqual(model.data["params"]["tile"], 32)
        self.assertIn(4096, model.data["params"]["ns"])

    def test_a_command_that_cannot_run_raises_its_one_line(self):
        with self.assertRaises(klab.KlabError) as e:
            klab.run_json("compare", "missing-a.json", "missing-b.json")
        self.assertEqual(e.exception.code, klab.EXIT_ERROR)
        self.assertIn("missing-a.json", e.exception.message)
        self.assertEqual(e.exception.message, str(e.exception))

    def test_a_failed_gate_is_a_report_and_anything_else_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            failed = klab.run_json(
                "check", "k", klab_bin=stand_in(d, '{"verdict": "fail"}', 2)
            )
            self.assertEqual((failed.code, failed.passed), (2, False))
            self.assertEqual(failed.data, {"verdict": "fail"})
            self.assertEqual(failed.stderr, "stand-in klab\n")
        for stdout, code, says in [
            ("{}", 3, "stand-in klab"),
            ("not json", 0, "its report is not JSON"),
        ]:
            with tempfile.TemporaryDirectory() as d:
                with self.assertRaises(klab.KlabError) as e:
                    klab.run_json("model", klab_bin=stand_in(d, stdout, code))
                self.assertEqual(e.exception.code, code)
                self.assertIn(says, str(e.exception))

    def test_an_error_is_klabs_error_lines_not_whatever_came_last(self):
        # A check of several kernels goes on past one that stopped on an error: its last
        # line is then another kernel's verdict.
        stderr = (
            "check a: ERROR: the reference, run once on the CPU at n=1: ValueError: no\n"
            "check b (declared), replay seed 1: 40 cases\n"
            "check b: verdict: PASS (40 cases)\n"
        )
        e = klab.KlabError(["klab", "check", "a", "b"], klab.EXIT_ERROR, stderr)
        self.assertEqual(
            e.message, "check a: ERROR: the reference, run once on the CPU at n=1: ValueError: no"
        )
        two = "error: one\nmore\ncheck c: ERROR: two\nthe end\n"
        self.assertEqual(klab.KlabError([], 1, two).message, "error: one; check c: ERROR: two")
        # Without an error line, or for another exit code, the last line.
        self.assertEqual(klab.KlabError([], 1, "a\nb\n").message, "b")
        self.assertEqual(klab.KlabError([], 3, two).message, "the end")


if __name__ == "__main__":
    unittest.main()
