"""The ``hitkit`` command line. Commands are thin: they parse, call the library, and print.

``hitkit.cli`` is the one place that composes the library with the web tier (``server/``): it hands
the embedded web server to ``launch`` and serves studies with ``hitkit serve``.
"""

from hitkit.cli import (  # noqa: F401 - each module adds its commands to main
    archives,
    managing,
    planning,
    recontact,
    reference,
    releasing,
    replaying,
    results,
    running,
)
from hitkit.cli.app import main

__all__ = ["main"]
