"""``python -m conformance``: the same as ``python conformance/conformance.py``."""

import os

from conformance.conformance import main

os.environ.setdefault("PYTHONWARNINGS", "ignore")
raise SystemExit(main())
