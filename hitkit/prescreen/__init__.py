"""Automatic pre-screening before paying humans: ChatMatch tournaments and ChatEval metrics.

- :mod:`.similarity`: tokens, a light stemmer and tf-idf cosine similarity (ChatMatch's similarity).
- :mod:`.dimensions`: the seven per-turn ChatMatch scorers; Algorithms 1–3 as pure functions.
- :mod:`.tournament`: the double round-robin, game points, win/tie/loss and TrueSkill rankings.
- :mod:`.chateval`: distinct-n, embedding cosine to a reference, sentence BLEU-2, perplexity.
- :mod:`.agreement`: Kendall τ between an automatic and a human ranking.
- :mod:`.models`: the local language model (perplexity) and sentence embedder, loaded offline.
- :mod:`.games` and :mod:`.prompts`: the tournament's games and ChatEval's prompts, played and scored.
- :mod:`.run`: ``hitkit prescreen``: play, score, rank and write the tables; :mod:`.section`: its report section.
"""
