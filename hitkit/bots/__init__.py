"""Bots: the client that asks a chatbot for a reply, hitkit's batching bot server, the QC bot.

Everything importable from here is light (requests, pydantic, PyYAML). The bot server's model
engine (:mod:`hitkit.bots.engine`) imports torch and transformers and is loaded only when a
Hugging Face model is served, so the web tier runs without the ``bots`` extra.
"""

from hitkit.bots.client import BotClient, BotConfig, BotError, BotRequestError, BotUnavailable
from hitkit.bots.corpus import CorpusError, Dialogue
from hitkit.bots.degraded import DegradedBot, distort, replacement_length

__all__ = [
    "BotClient",
    "BotConfig",
    "BotError",
    "BotRequestError",
    "BotUnavailable",
    "CorpusError",
    "DegradedBot",
    "Dialogue",
    "distort",
    "replacement_length",
]
