"""The study: the study file and its shared sections, validated once into typed objects; the study as
stored in the database and the context every process loads; ``hitkit init``; where a study is served.

May use: ``db``, ``protocols`` (the registry; never from ``config`` and the sections it is made of, which the
protocols build on), ``providers`` (for load-time checks of a platform's rules, in ``loading``),
``errors``. Never the worker's path, the scheduler or the web tier."""
