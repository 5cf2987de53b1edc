"""klab's manifests as Python values: a manifest is the TOML klab reads (``[[kernel]]``
entries, ``[ops.NAME]`` operations with their sizes, buffers, dtypes, rules and cases), held
as the dicts and lists ``tomllib`` gives.

    from klab import manifest
    m = manifest.load("examples/ops/layernorm/layernorm.toml")
    m["ops"]["layernorm"]["sizes"]["rows"]["values"].append(4097)
    manifest.write("layernorm.toml", m)    # beside its sources: paths in it are relative

klab itself is the judge of what a manifest may hold: ``klab check FILE:KERNEL --plan`` reads
one and says in one line what is wrong, without a GPU.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import tempfile
from typing import Any, Dict, List, Optional

try:
    import tomllib as _toml
except ImportError:  # Python before 3.11
    try:
        import tomli as _toml  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover
        _toml = None  # type: ignore[assignment]

__all__ = ["dumps", "loads", "load", "python_reference", "write"]

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def loads(text: str) -> Dict[str, Any]:
    """A manifest's values from its TOML text."""
    if _toml is None:  # pragma: no cover
        raise RuntimeError("reading TOML needs Python 3.11, or the tomli package before it")
    return _toml.loads(text)


def load(path: str) -> Dict[str, Any]:
    """A manifest's values from its file (a UTF-8 byte-order mark skipped, as klab skips
    it: an editor on Windows may write one)."""
    with open(path, "rb") as f:
        return loads(f.read().decode("utf-8-sig"))


def dumps(manifest: Dict[str, Any]) -> str:
    """TOML for ``manifest`` that ``loads`` reads back as equal values."""
    if not isinstance(manifest, dict):
        raise TypeError(f"a manifest is a dict, not {type(manifest).__name__}")
    out: List[str] = []
    _table(out, [], manifest)
    return "\n".join(out).lstrip("\n") + "\n"


def write(path: str, manifest: Dict[str, Any]) -> None:
    """Write ``manifest`` to ``path`` whole or not at all (a temporary file renamed), with the
    mode the file had, or a new file's. A symbolic link is followed: its target is replaced,
    and the link stays a link."""
    text = dumps(manifest)
    path = os.path.realpath(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".klab-manifest-", suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def python_reference(
    function: str,
    *,
    python: str = "python3",
    tensors: str = "numpy",
    device: Optional[str] = None,
    timeout_s: Optional[int] = None,
) -> Dict[str, Any]:
    """The ``reference`` table of an operation whose reference is a Python function
    (:mod:`klab.reference`): ``function`` is ``FILE.py:NAME``, relative to the manifest's
    folder, or ``MODULE:NAME``. klab runs ``python`` (from ``PATH`` unless it holds a ``/``;
    an interpreter that can import klab and NumPy) once per case, with ``timeout_s`` (klab's
    default when ``None``). ``tensors="torch"`` passes torch tensors, on ``device``."""
    if tensors not in ("numpy", "torch"):
        raise ValueError(f"tensors is numpy or torch, not {tensors!r}")
    if device is not None and tensors != "torch":
        raise ValueError("device is for tensors='torch'")
    argv = [python, "-m", "klab.reference", function]
    if tensors != "numpy":
        argv += ["--tensors", tensors]
    if device is not None:
        argv += ["--device", device]
    if timeout_s is None:
        return {"command": argv}
    return {"command": {"argv": argv, "timeout_s": int(timeout_s)}}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _key(k: Any) -> str:
    if not isinstance(k, str):
        raise TypeError(f"a TOML key is a string, not {k!r}")
    return k if _BARE.fullmatch(k) else _string(k)


def _string(s: str) -> str:
    # JSON's escapes are TOML basic-string escapes (non-ASCII is written as itself), but for
    # DEL, which TOML does not allow raw.
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def _is_tables(v: Any) -> bool:
    return isinstance(v, list) and len(v) > 0 and all(isinstance(x, dict) for x in v)


def _value(v: Any, where: str) -> str:
    # The base types' own spellings: a subclass (an IntEnum, NumPy's float64) may print as
    # something else.
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        # klab reads a TOML integer as a signed 64-bit one; TOML promises no more either.
        if not _I64_MIN <= v <= _I64_MAX:
            raise TypeError(f"{where}: TOML has no integer {int.__repr__(v)}: klab reads i64")
        return int.__repr__(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return float.__repr__(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, (datetime.date, datetime.time)):
        return _datetime(v, where)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x, where) for x in v) + "]"
    if isinstance(v, dict):
        items = (f"{_key(k)} = {_value(x, f'{where}.{k}')}" for k, x in v.items())
        return "{ " + ", ".join(items) + " }"
    raise TypeError(f"{where}: TOML has no value for {v!r} ({type(v).__name__})")


def _datetime(v: Any, where: str) -> str:
    """TOML's dates, times and date-times (a datetime is a date too). TOML's local time has
    no offset, and its offsets are whole minutes: Python's isoformat writes either, and TOML
    would not read it back."""
    if isinstance(v, datetime.time) and v.tzinfo is not None:
        raise TypeError(f"{where}: TOML has no time with a tzinfo ({v.isoformat()})")
    if isinstance(v, datetime.datetime) and v.utcoffset() is not None:
        if v.utcoffset() % datetime.timedelta(minutes=1):
            raise TypeError(f"{where}: TOML has no offset in seconds ({v.isoformat()})")
    return v.isoformat()


def _table(out: List[str], path: List[str], table: Dict[str, Any]) -> None:
    # A table's own keys come before its sub-tables, as TOML requires.
    subtables = [(k, v) for k, v in table.items() if isinstance(v, dict)]
    arrays = [(k, v) for k, v in table.items() if _is_tables(v)]
    for k, v in table.items():
        if isinstance(v, dict) or _is_tables(v):
            continue
        where = ".".join(path + [str(k)])
        out.append(f"{_key(k)} = {_value(v, where)}")
    for k, v in subtables:
        sub = path + [_key(k)]
        out.append("")
        out.append("[" + ".".join(sub) + "]")
        _table(out, sub, v)
    for k, v in arrays:
        sub = path + [_key(k)]
        for item in v:
            out.append("")
            out.append("[[" + ".".join(sub) + "]]")
            _table(out, sub, item)
