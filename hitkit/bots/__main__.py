"""``python -m hitkit.bots serve …``: the bot server without the main ``hitkit`` CLI."""

from hitkit.bots.cli import bots

if __name__ == "__main__":
    bots(prog_name="python -m hitkit.bots")
