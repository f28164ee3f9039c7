"""A worker's path through a HIT: admission and arrival checks, the flow of a HIT, live chat and its SQL,
signed tokens, input bounds, the web tier's security policy and the authenticity signals of typed text.

May use: ``study``, ``money``, ``protocols``, ``providers``, ``tables`` (statuses), ``db``. Never
``running`` or the web tier: routes in ``server/`` call down into this room."""
