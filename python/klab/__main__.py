"""``python -m klab ARGS``: the installed ``klab`` binary with ARGS, its exit code passed on."""

import subprocess
import sys

from klab import find_klab_bin


def main() -> int:
    return subprocess.run([find_klab_bin(), *sys.argv[1:]]).returncode


if __name__ == "__main__":
    sys.exit(main())
