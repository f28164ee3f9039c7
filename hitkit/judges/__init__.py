"""LLM judges: labelling every item of a study with a judge (``judge:``) and drawing the crowd's share
of judged units.

May use: ``study``, ``protocols``, ``bots`` (the client), ``tables``, ``db``."""
