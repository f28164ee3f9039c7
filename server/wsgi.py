"""WSGI entry point for gunicorn: ``gunicorn -c ops/gunicorn.conf.py server.wsgi:app``."""
import os

from server import create_app

if "HITKIT_DATABASE_URL" not in os.environ:
    raise RuntimeError("set HITKIT_DATABASE_URL to the study database, e.g. postgresql://hitkit@db/hitkit")
app = create_app(os.environ["HITKIT_DATABASE_URL"])
