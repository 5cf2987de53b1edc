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
- no GPU on this machine: the test is skipped, and says so twice: the skip's reason, and a
  :class:`NoGpuWarning` in pytest's warnings summary, so a CI log without ``-rs`` still
  shows that nothing ran;
- klab could not run the command (a bad manifest, a missing tool): :class:`klab.KlabError`,
  with klab's one-line message, which pytest reports as the test's error.
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional

from . import EXIT_GATE_FAILED, Report, env, run_json

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


def _skip_without_gpu(what: str, klab_bin: Optional[str]) -> None:
    why = gpu_problem(klab_bin)
    if why is not None:
        reason = f"SKIPPED (no GPU): {what}: {why}"
        # Attributed to the test's own line (the helper's caller).
        warnings.warn(NoGpuWarning(reason), stacklevel=4)
        _pytest().skip(reason)


def check(kernel: str, *args: str, klab_bin: Optional[str] = None, timeout: Optional[float] = None) -> Report:
    """``klab check KERNEL ARGS`` as a test (see the module's docs)."""
    return _gate("check", kernel, args, check_failure, klab_bin, timeout)


def sanitize(kernel: str, *args: str, klab_bin: Optional[str] = None, timeout: Optional[float] = None) -> Report:
    """``klab sanitize KERNEL ARGS`` as a test (see the module's docs)."""
    return _gate("sanitize", kernel, args, sanitize_failure, klab_bin, timeout)


def _gate(command, kernel, args, failure, klab_bin, timeout) -> Report:
    """Run the gate; skip without a GPU; fail with `failure`'s account of a failed gate."""
    what = f"klab {command} {kernel}"
    _skip_without_gpu(what, klab_bin)
    report = run_json(command, kernel, *args, klab_bin=klab_bin, timeout=timeout)
    if report.code == EXIT_GATE_FAILED:
        _pytest().fail(failure(what, report), pytrace=False)
    return report


def _last_lines(stderr: str, n: int = 3) -> List[str]:
    return [line for line in stderr.splitlines() if line.strip()][-n:]


def check_failure(what: str, report: Report) -> str:
    """A failed check, as the test's failure: every kernel's failed cases (the first few in
    full: case, rule, first bad index, both values)."""
    data = report.data
    reports: List[Any] = data if isinstance(data, list) else [data]
    lines = []
    for r in reports:
        if not isinstance(r, dict):
            continue
        cases = r.get("cases") or []
        failed = [c for c in cases if not c.get("pass") and not c.get("skipped")]
        if r.get("known_broken"):
            lines.append(f"{r.get('kernel')}: REJECTED (known-broken: {r['known_broken']})")
            if not failed:
                lines.append(f"  the oracle passed all {len(cases)} cases: the label rejected it, no case did")
        if failed:
            lines.append(f"{r.get('kernel')}: {len(failed)} of {len(cases)} cases fail")
            for c in failed[:3]:
                lines.append(f"  {c.get('case')}: {c.get('detail')}")
            if len(failed) > 3:
                lines.append(f"  ... and {len(failed) - 3} more")
    # A case that ended its process is said on stderr, not in a report.
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
