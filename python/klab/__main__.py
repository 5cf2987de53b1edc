"""``python -m klab ARGS``: the installed ``klab`` binary with ARGS. On POSIX it replaces
this process, so signals and the exit status are the binary's own."""

import os
import subprocess
import sys

from klab import find_klab_bin


def main() -> int:
    binary = find_klab_bin()
    if os.name == "posix":
        os.execv(binary, [binary, *sys.argv[1:]])
    return subprocess.run([binary, *sys.argv[1:]]).returncode


if __name__ == "__main__":
    sys.exit(main())
