"""klab.manifest: every manifest in the repository round-trips through Python values, and
klab reads what the module writes."""

import glob
import math
import os
import shutil
import tempfile
import unittest

import klab
from klab import manifest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class RoundTrip(unittest.TestCase):
    def test_every_manifest_in_the_repository(self):
        files = sorted(
            glob.glob(os.path.join(ROOT, "examples", "**", "*.toml"), recursive=True)
            + glob.glob(os.path.join(ROOT, "kernels", "*.toml"))
        )
        self.assertGreater(len(files), 10)
        for f in files:
            with self.subTest(f=os.path.relpath(f, ROOT)):
                values = manifest.load(f)
                self.assertEqual(manifest.loads(manifest.dumps(values)), values)

    def test_values_toml_needs_care_with(self):
        values = {
            "a key": "quote \" backslash \\ newline \n tab \t unicode µs",
            "floats": [1e-05, -0.0, 1.5e300, math.inf, -math.inf],
            "empty": {},
            "nested": {"deeper": {"x": 1, "list": [[1, 2], ["a"]]}},
            "kernel": [{"name": "a", "op": {"n": 1}}, {"name": "b", "inline": [{"k": True}]}],
        }
        back = manifest.loads(manifest.dumps(values))
        self.assertEqual(back, values)
        # What JSON leaves raw and TOML does not allow, a key a line end would end, dates,
        # and subclasses that print as something else.
        import datetime
        import enum

        class Size(enum.IntEnum):
            N = 4096

        class Half(float):
            def __repr__(self):
                return "Half()"

        more = {
            "del \x7f": "a\x7fb",
            "abc\n": 1,
            "when": datetime.date(2026, 12, 4),
            "at": datetime.datetime(2026, 12, 4, 20, 25, 7),
            "n": Size.N,
            "x": Half(0.5),
        }
        self.assertEqual(manifest.loads(manifest.dumps(more)), more)
        nan = manifest.loads(manifest.dumps({"x": math.nan}))["x"]
        self.assertTrue(math.isnan(nan))

    def test_what_toml_cannot_hold_is_refused_by_name(self):
        with self.assertRaises(TypeError) as e:
            manifest.dumps({"ops": {"k": {"bench": None}}})
        self.assertIn("ops.k.bench", str(e.exception))
        with self.assertRaises(TypeError):
            manifest.dumps(["not", "a", "table"])

    def test_what_toml_would_misread_is_refused_by_name(self):
        # TOML's local time has no offset, and klab reads integers as i64: Python would
        # write `12:30:00+00:00` and `9223372036854775808`, which klab cannot read.
        import datetime

        utc = datetime.timezone.utc
        for value, says in [
            (datetime.time(12, 30, tzinfo=utc), "no time with a tzinfo"),
            (2**63, "no integer 9223372036854775808"),
            (-(2**63) - 1, "no integer -9223372036854775809"),
        ]:
            with self.subTest(value=value):
                with self.assertRaises(TypeError) as e:
                    manifest.dumps({"ops": {"k": {"at": [value]}}})
                self.assertIn("ops.k.at", str(e.exception))
                self.assertIn(says, str(e.exception))
        edges = {"lo": -(2**63), "hi": 2**63 - 1, "at": datetime.datetime(2026, 1, 2, tzinfo=utc)}
        self.assertEqual(manifest.loads(manifest.dumps(edges)), edges)

    def test_a_byte_order_mark_is_read_past_as_klab_reads_past_it(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.toml")
            with open(path, "wb") as f:
                f.write(b"\xef\xbb\xbfsource = \"k.cu\"\n")
            self.assertEqual(manifest.load(path), {"source": "k.cu"})


class KlabReadsIt(unittest.TestCase):
    def test_a_written_manifest_plans_as_its_original(self):
        with tempfile.TemporaryDirectory() as d:
            user = os.path.join(d, "user")
            shutil.copytree(os.path.join(ROOT, "examples", "user"), user)
            original = os.path.join(user, "mine.toml")
            written = os.path.join(user, "written.toml")
            manifest.write(written, manifest.load(original))
            plans = []
            for path in (original, written):
                done = klab.run(["check", f"{path}:my_naive", "--plan"])
                self.assertEqual(done.returncode, 0, done.stderr)
                plans.append(done.stdout.splitlines()[0])
            self.assertEqual(plans[0], plans[1])
            self.assertTrue(plans[0].startswith("check plan: my_naive:"), plans[0])

    def test_a_manifest_klab_refuses_is_one_line(self):
        with tempfile.TemporaryDirectory() as d:
            user = os.path.join(d, "user")
            shutil.copytree(os.path.join(ROOT, "examples", "user"), user)
            values = manifest.load(os.path.join(user, "mine.toml"))
            del values["kernel"][0]["entry"]
            broken = os.path.join(user, "broken.toml")
            manifest.write(broken, values)
            done = klab.run(["check", f"{broken}:my_naive", "--plan"])
            self.assertEqual(done.returncode, klab.EXIT_ERROR)
            self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)

    def test_a_failed_write_leaves_nothing_and_a_write_keeps_the_mode(self):
        with tempfile.TemporaryDirectory() as d:
            target = os.path.join(d, "m.toml")
            with self.assertRaises(TypeError):
                manifest.write(target, {"x": object()})
            # Refused while writing the file (a lone surrogate cannot be UTF-8).
            with self.assertRaises(UnicodeEncodeError):
                manifest.write(target, {"x": "\ud800"})
            self.assertEqual(os.listdir(d), [])
            manifest.write(target, {"x": 1})
            os.chmod(target, 0o640)
            manifest.write(target, {"x": 2})
            self.assertEqual(os.stat(target).st_mode & 0o777, 0o640)
            self.assertEqual(manifest.load(target), {"x": 2})

    @unittest.skipIf(not hasattr(os, "symlink") or os.name == "nt", "SKIPPED: no symlinks here")
    def test_a_write_through_a_symlink_replaces_its_target_and_keeps_the_link(self):
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "shared"))
            target = os.path.join(d, "shared", "m.toml")
            manifest.write(target, {"x": 1})
            os.chmod(target, 0o640)
            link = os.path.join(d, "m.toml")
            os.symlink(os.path.join("shared", "m.toml"), link)
            manifest.write(link, {"x": 2})
            self.assertTrue(os.path.islink(link))
            self.assertEqual(manifest.load(target), {"x": 2})
            self.assertEqual(os.stat(target).st_mode & 0o777, 0o640)
            self.assertEqual(sorted(os.listdir(d)), ["m.toml", "shared"])
            self.assertEqual(os.listdir(os.path.join(d, "shared")), ["m.toml"])


if __name__ == "__main__":
    unittest.main()
