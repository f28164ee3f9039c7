"""The tidy tables: exports (METHODS.md §4), ``hitkit.load`` for notebooks, the shared columns and
statuses, the software versions a result was computed with, the authenticity tables.

May use: ``study``, ``protocols``, ``db``, ``analysis``. Never ``worker``, ``running`` or the web tier."""
