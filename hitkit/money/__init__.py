"""Money and its verdicts: the ledger (the only writer of ``Payment`` rows, the one approve path), money
arithmetic in ``Decimal``, which workers pass quality control and what approval does with the others.

May use: ``study``, ``protocols``, ``providers``, ``tables`` (statuses), ``db``. Never ``running``,
``worker`` or the web tier."""
