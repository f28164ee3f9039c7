"""The study: the study file and its shared sections, validated once into typed objects; the study as
stored in the database and the context every process loads; ``hitkit init``; where a study is served.

May use: ``db``, ``protocols`` (the registry), ``providers`` (for load-time checks of a platform's rules),
``errors``. Never the worker's path, the scheduler or the web tier."""
