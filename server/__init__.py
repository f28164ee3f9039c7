"""hitkit's web application: worker pages and the JSON API they use. No business logic lives here:
routes read the request, call :mod:`hitkit.flow`, and render or serialise what it returns."""
from __future__ import annotations

from pathlib import Path

from flask import Flask

import hit_templates
from hitkit.study import resolve_secret

MAX_BODY_BYTES = 64 * 1024
"""Largest request body a worker page may send (an answer, a chat turn, a submission)."""


def create_app(database_url: str, secret: str | None = None) -> Flask:
    """The Flask app serving every study in the database at ``database_url``."""
    templates = Path(hit_templates.__file__).parent
    app = Flask(__name__, template_folder=str(templates), static_folder=str(templates / "static"),
                static_url_path="/static")
    app.config.update(
        HITKIT_DATABASE_URL=database_url,
        HITKIT_SECRET=secret or resolve_secret(database_url),
        MAX_CONTENT_LENGTH=MAX_BODY_BYTES,
    )
    from server.chat import bp as chat_bp
    from server.worker import bp as worker_bp

    app.register_blueprint(worker_bp)
    app.register_blueprint(chat_bp)
    return app
