"""``python -m flatbook ...`` is the ``flatbook`` command."""

import sys

from .cli import main

sys.exit(main())
