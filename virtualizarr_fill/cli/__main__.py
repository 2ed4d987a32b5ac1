"""``python -m virtualizarr_fill.cli``: the same command as the ``virtualizarr-fill`` script."""

import sys

from virtualizarr_fill.cli._main import main

if __name__ == "__main__":
    sys.exit(main())
