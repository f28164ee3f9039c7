"""``python -m hitkit.cli``: the ``hitkit`` command (as the bot server's subprocess and some tests run it)."""

import sys

from hitkit.cli import main

sys.exit(main())
