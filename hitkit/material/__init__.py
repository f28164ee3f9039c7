"""The material a study is built from: bot–bot conversations generated in parallel (resumable), and
the JSONL files coordinators give hitkit, read with errors that name file, line and column.

May use: ``study``, ``protocols``, ``bots``, ``db``."""
