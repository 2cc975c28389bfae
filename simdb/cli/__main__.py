"""``python -m simdb.cli``: the ``simdb`` command without the console script."""

import sys

from simdb.cli.thin import main

sys.exit(main())
