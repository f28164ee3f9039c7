"""Importers: archives from other tools and closed platforms into hitkit's tidy tables."""
