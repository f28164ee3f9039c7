"""Running a study: ``hitkit launch`` and its dry run, the scheduler's tick, the stopping rule, ``hitkit sync``,
the coordinator's controls, status and the live monitor.

The top of the library below the command line: it may use every other room. Nothing else in
``hitkit/`` imports it (the command line and the web tier's composition root may)."""
