"""Simulated studies: the simulated crowd (synthetic workers who use the real pages over HTTP, with
their typing profiles), staffing a simulated study, and ``hitkit plan`` with its judge share.

May use: ``study``, ``protocols``, ``providers``, ``judges``, ``tables``, ``analysis``, ``db``. It reaches
the server only over HTTP, like a person: never ``worker``'s routes or the web tier."""
