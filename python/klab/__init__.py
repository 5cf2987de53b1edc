"""klab from Python: the ``klab`` binary this wheel installed, and its commands run with
their JSON reports parsed (never their prose). :mod:`klab.manifest` reads and writes
manifests as Python values; :mod:`klab.reference` runs a Python function as a declared
operation's reference; :mod:`klab.testing` runs klab's gates as pytest tests.

    import klab
    r = klab.run_json("rounds", "a.toml:k", "b.toml:k", "--n", "4096")
    r.data["analyses"][0]["analysis"]["verdict"]   # the report, as JSON values
    r.code                                         # 0, or 2 when a gate failed

A command that could not run (klab's exit code 1: a runtime or argument error) raises
:class:`KlabError` with klab's one-line message. A gate that failed (exit code 2) is a
verdict, not an error: it comes back as a :class:`Report` whose ``passed`` is false.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from typing import Any, Optional, Sequence

__all__ = [
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_GATE_FAILED",
    "KlabError",
    "Report",
    "env",
    "find_klab_bin",
    "run",
    "run_json",
]

# klab's exit codes, as its binary documents them.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_GATE_FAILED = 2


class KlabError(RuntimeError):
    """klab could not run the command (exit code 1, or an unexpected code)."""

    def __init__(self, argv: Sequence[str], code: int, stderr: str):
        self.argv = list(argv)
        self.code = code
        self.stderr = stderr
        self.message = _message(code, stderr)
        super().__init__(self.message)


# The lines in which klab states an error: its own, and a check's kernel that stopped on one.
_ERROR_LINE = re.compile(r"^(error:|check \S+: ERROR:)")


def _message(code: int, stderr: str) -> str:
    """klab's error in its own words. For exit 1, its error lines (joined), since a check of
    several kernels goes on past one that stopped on an error and its last line is then
    another kernel's; else, or without one, its last line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if not lines:
        return f"klab exited {code} and said nothing"
    errors = [line for line in lines if _ERROR_LINE.match(line)] if code == EXIT_ERROR else []
    return "; ".join(errors) if errors else lines[-1]


@dataclass(frozen=True)
class Report:
    """A command's report: its exit code (0, or 2 when a gate failed), its JSON and stderr."""

    code: int
    data: Any
    stderr: str

    @property
    def passed(self) -> bool:
        return self.code == EXIT_OK


def find_klab_bin() -> str:
    """The ``klab`` binary installed with this package: in the environment's scripts folder,
    else the user scheme's, else beside the Python running this, else in the ``bin`` folder
    beside the package (``pip install --target``)."""
    exe = "klab" + (sysconfig.get_config_var("EXE") or "")
    folders = [sysconfig.get_path("scripts")]
    user = _user_scheme()
    if user is not None:
        folders.append(sysconfig.get_path("scripts", scheme=user))
    folders.append(os.path.dirname(sys.executable))
    folders.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin"))
    seen: list = []
    for folder in folders:
        if folder in seen:
            continue
        seen.append(folder)
        path = os.path.join(folder, exe)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(f"no {exe} in {', '.join(seen)}: is the klab wheel installed here?")


def _user_scheme() -> Optional[str]:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    if os.name == "nt":
        return "nt_user"
    if sys.platform == "darwin" and sysconfig.get_config_var("PYTHONFRAMEWORK"):
        return "osx_framework_user"
    return "posix_user"


def run(
    args: Sequence[str],
    *,
    klab_bin: Optional[str] = None,
    timeout: Optional[float] = None,
    cwd: Optional[str] = None,
) -> subprocess.CompletedProcess:
    """Run ``klab ARGS`` and return what it did, whatever its exit code."""
    argv = [klab_bin or find_klab_bin(), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def run_json(
    command: str,
    *args: str,
    klab_bin: Optional[str] = None,
    timeout: Optional[float] = None,
    cwd: Optional[str] = None,
) -> Report:
    """Run ``klab COMMAND ARGS --format json`` and parse its report.

    Exit 0 or 2 gives a :class:`Report`; anything else raises :class:`KlabError`, as does
    a report that is not JSON."""
    argv = [command, *args, "--format", "json"]
    done = run(argv, klab_bin=klab_bin, timeout=timeout, cwd=cwd)
    if done.returncode not in (EXIT_OK, EXIT_GATE_FAILED):
        raise KlabError(["klab", *argv], done.returncode, done.stderr)
    try:
        data = json.loads(done.stdout)
    except ValueError as e:
        raise KlabError(
            ["klab", *argv], done.returncode, f"{done.stderr}\nits report is not JSON: {e}"
        ) from None
    return Report(code=done.returncode, data=data, stderr=done.stderr)


def env(*, klab_bin: Optional[str] = None) -> Any:
    """``klab env --format json``'s report, whatever its exit code: its ``device`` is
    ``None`` on a machine without one, and ``device_error`` says why. When klab printed no
    JSON, the report is just that, ``device_error`` being klab's last line on stderr."""
    done = run(["env", "--format", "json"], klab_bin=klab_bin)
    try:
        return json.loads(done.stdout)
    except ValueError:
        return {"device": None, "device_error": KlabError(["klab", "env"], done.returncode, done.stderr).message}
