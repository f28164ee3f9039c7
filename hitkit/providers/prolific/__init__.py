"""The Prolific provider, in parts one can read apart.

- :mod:`.client`: Prolific's REST API (HTTP, retries, errors, pagination) and its pay rules; no database.
- :mod:`.state`: what this database remembers doing on Prolific (``prolific_*`` events), the session passed in.
- :mod:`.posting`: the study's body and the checks before publishing or adding places.
- :mod:`.arrival`: a participant's arrival, verified against their live submission.
- :mod:`.bonuses`: a bonus created, then paid, each step remembered; never paid twice.
- :mod:`.provider`: :class:`~.provider.ProlificProvider`, the :class:`~hitkit.providers.base.CrowdProvider`
  that calls the client and returns facts; it never writes ledger rows (:mod:`hitkit.money.ledger` does).
"""
