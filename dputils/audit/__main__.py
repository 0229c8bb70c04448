"""``python -m dputils.audit``: the audit command line (same as ``python -m dputils audit``)."""

import sys

from ..cli import main

sys.exit(main(["audit", *sys.argv[1:]]))
