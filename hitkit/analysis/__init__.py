"""Statistics the protocols share: tidy tables, clustered bootstrap and multiple testing
(``inference``), ranking, vectorised TrueSkill; DataFrames in, results out (``base.AnalysisResult``).
Each protocol's own analysis lives in its folder, ``hitkit/protocols/NAME/analysis.py``."""
