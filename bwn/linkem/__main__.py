"""``python -m bwn.linkem``: same as the ``bwn-link`` console script."""

import sys

from .cli import main

sys.exit(main())
