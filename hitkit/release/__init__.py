"""``hitkit release``: a data set others can load, with a card, and without anyone's personal data.

The release is made from the study's tidy tables (an export and its analysis), never from the database
directly: :mod:`~hitkit.release.pseudonyms` replaces platform ids by keyed pseudonyms,
:mod:`~hitkit.release.scrub` replaces personal data in free text by typed placeholders,
:mod:`~hitkit.release.build` writes one Parquet configuration per table, and :mod:`~hitkit.release.card`
writes the dataset card (``README.md``) and ``release.json``.
"""
