"""klab's gates as ordinary pytest tests.

    from klab.testing import check, sanitize

    def test_layer_norm_is_correct():
        check("kernels/layernorm.toml:layernorm")

    def test_layer_norm_is_memory_safe():
        sanitize("kernels/layernorm.toml:layernorm", "--tools", "memcheck,racecheck")

Each helper runs the klab command (``klab check`` or ``klab sanitize``, with any further
arguments) and reads its JSON report, never its prose:

- the gates passed: the helper returns the :class:`klab.Report`;
- a gate failed: the test fails with klab's verdict (for a check, the case, the first bad
  index and both values, as klab states them; for a sanitizer run, each tool's first finding
  in the tool's own words);
- no GPU on this machine: klab reads the manifest and runs the reference first, as it does
  before it asks for a device (``klab check KERNEL --plan``, with a check's own arguments);
  then the test is skipped, and says so twice: the skip's reason, and a
  :class:`NoGpuWarning` in pytest's warnings summary, so a CI log without ``-rs`` still
  shows that nothing ran. Under ``-W error`` the warning is not raised (it would turn the
  skip into a failure): the skip alone says it;
- klab could not run the command (a bad manifest, a missing tool, a reference that
  fails): :class:`klab.KlabError`, with klab's one-line message, raised from the test, which
  pytest reports as a failure with that exception (not as a gate's verdict), with a GPU or
  without.
"""

from __future__ import annotations

import re
import warnings
from typing import Any, Dict, List, Optional

from . import EXIT_GATE_FAILED, EXIT_OK, KlabError, Report, env, run, run_json

__all__ = ["NoGpuWarning", "check", "gpu_problem", "sanitize"]


class NoGpuWarning(UserWarning):
    """A klab test was skipped because this machine has no usable GPU."""


_GPU: Dict[Optional[str], Optional[str]] = {}


def gpu_problem(klab_bin: Optional[str] = None) -> Optional[str]:
    """Why this machine cannot run kernels (``klab env``'s own words), or ``None`` when it
    can. Asked once per klab binary."""
    if klab_bin not in _GPU:
        report = env(klab_bin=klab_bin)
        device = report.get("device") if isinstance(report, dict) else None
        why = report.get("device_error") if isinstance(report, dict) else None
        _GPU[klab_bin] = None if device else (why or "klab env found no device")
    return _GPU[klab_bin]


def _pytest():
    import pytest

    return pytest


def _skip(what: str, why: str) -> None:
    """Skip the test for want of a GPU, with a :class:`NoGpuWarning` unless the warnings
    filters make it an error (``-W error``): a machine without a GPU is no test failure."""
    reason = f"SKIPPED (no GPU): {what}: {why}"
    try:
        # Attributed to the test's own line (the caller of check or sanitize).
        warnings.warn(NoGpuWarning(reason), stacklevel=4)
    except NoGpuWarning:
        pass
    _pytest().skip(reason)


def check(kernel: str, *args: str, klab_bin: Optional[str] = None, timeout: Optional[float] = None) -> Report:
    """``klab check KERNEL ARGS`` as a test (see the module's docs)."""
    return _gate("check", kernel, args, check_failure, klab_bin, timeout)


def sanitize(kernel: str, *args: str, klab_bin: Optional[str] = None, timeout: Optional[float] = None) -> Report:
    """``klab sanitize KERNEL ARGS`` as a test (see the module's docs)."""
    return _gate("sanitize", kernel, args, sanitize_failure, klab_bin, timeout)


def _gate(command, kernel, args, failure, klab_bin, timeout) -> Report:
    """Run the gate; fail with `failure`'s account of a failed gate. Without a GPU, skip once
    klab has read the manifest and run the reference: a wrong kernel name, manifest or
    reference is an error on every machine, not a skip on some."""
    what = f"klab {command} {kernel}"
    why = gpu_problem(klab_bin)
    if why is not None:
        # What klab checks without a GPU (the manifest, the check's own options, the
        # reference run once) fails here; then the skip, which no error text decides.
        _plan(kernel, args if command == "check" else (), klab_bin, timeout)
        _skip(what, why)
    report = run_json(command, kernel, *args, klab_bin=klab_bin, timeout=timeout)
    if report.code == EXIT_GATE_FAILED:
        _pytest().fail(failure(what, report), pytrace=False)
    return report


def _plan(kernel: str, args, klab_bin: Optional[str], timeout: Optional[float]) -> None:
    """``klab check KERNEL ARGS --plan``: klab reads the manifest and runs the reference once
    on the CPU, without a GPU; what it refuses raises :class:`klab.KlabError`."""
    argv = ["check", kernel, *args, "--plan"]
    done = run(argv, klab_bin=klab_bin, timeout=timeout)
    if done.returncode != EXIT_OK:
        raise KlabError(["klab", *argv], done.returncode, done.stderr)


def _last_lines(stderr: str, n: int = 3) -> List[str]:
    return [line for line in stderr.splitlines() if line.strip()][-n:]


# klab's lines about a kernel's check processes, on stderr: a case that ended its process (a
# crash, a hang: `check K: FAIL: ...`), the verdict after such deaths, an error, a give-up.
_PROCESS_LINE = re.compile(r"^check (\S+): (FAIL:|verdict:|ERROR:|\d+ processes died)")


def _process_lines(stderr: str) -> Dict[str, List[str]]:
    """klab's stderr lines about each kernel's check processes, by kernel, in order."""
    by_kernel: Dict[str, List[str]] = {}
    for line in stderr.splitlines():
        m = _PROCESS_LINE.match(line.strip())
        if m:
            by_kernel.setdefault(m.group(1), []).append(line.strip())
    return by_kernel


def _case_lines(r: Dict[str, Any], died: bool) -> List[str]:
    """A kernel's report as failure lines: its rejection, its failed cases (the first three
    in full)."""
    cases = r.get("cases") or []
    failed = [c for c in cases if not c.get("pass") and not c.get("skipped")]
    lines = []
    if r.get("known_broken"):
        lines.append(f"{r.get('kernel')}: REJECTED (known-broken: {r['known_broken']})")
        if not failed and not died:
            lines.append(f"  the oracle passed all {len(cases)} cases: the label rejected it, no case did")
    if failed:
        lines.append(f"{r.get('kernel')}: {len(failed)} of {len(cases)} cases fail")
        for c in failed[:3]:
            lines.append(f"  {c.get('case')}: {c.get('detail')}")
        if len(failed) > 3:
            lines.append(f"  ... and {len(failed) - 3} more")
    return lines


def check_failure(what: str, report: Report) -> str:
    """A failed check, as the test's failure: every kernel's failed cases (the first few in
    full: case, rule, first bad index, both values), and klab's stderr lines on a case that
    ended its process (a crash, a hang), which no report holds: a kernel whose process hung
    has no report at all, and one whose process died has only the report of the fresh
    process that ran the cases after it."""
    data = report.data
    reports = [r for r in (data if isinstance(data, list) else [data]) if isinstance(r, dict)]
    said = _process_lines(report.stderr)
    lines = []
    for r in reports:
        kernel = str(r.get("kernel"))
        died = said.pop(kernel, [])
        own = _case_lines(r, bool(died))
        if died and not own:
            own = [f"{kernel}: a case ended its check process"]
        lines += own + [f"  {line}" for line in died]
    for kernel, died in said.items():
        lines += [f"{kernel}: no report (its check process hung or died)"]
        lines += [f"  {line}" for line in died]
    if not lines:
        lines = ["a gate failed"] + [f"  {line}" for line in _last_lines(report.stderr)]
    return f"{what}: FAIL\n" + "\n".join(lines)


def sanitize_failure(what: str, report: Report) -> str:
    """A failed sanitizer gate, as the test's failure: each kernel's verdict and each tool's
    first finding in the tool's own words."""
    data = report.data if isinstance(report.data, dict) else {}
    lines = []
    for k in data.get("kernels") or []:
        lines.append(f"{k.get('kernel')}: {k.get('verdict')}")
        for r in k.get("runs") or []:
            tool = r.get("tool")
            if r.get("timed_out"):
                lines.append(f"  {tool}: hung: killed by the watchdog after {data.get('watchdog_s')} s")
                continue
            findings = (r.get("report") or {}).get("findings") or []
            if findings:
                first = (findings[0].get("raw") or findings[0].get("kind") or "").strip()
                lines.append(f"  {tool}: {len(findings)} finding(s); first: {first}")
    if not lines:
        lines = ["a gate failed"] + [f"  {line}" for line in _last_lines(report.stderr)]
    return f"{what}: FAIL\n" + "\n".join(lines)
