"""``python -m dputils.audit``: the audit command line (same as ``python -m dputils audit``)."""

import sys

from ..cli import main

if __name__ == "__main__":
    sys.exit(main(["audit", *sys.argv[1:]]))
