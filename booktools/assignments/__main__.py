"""``python -m booktools.assignments ...``: :func:`booktools.assignments.cli.main`."""

import sys

from booktools.assignments.cli import main

sys.exit(main())
