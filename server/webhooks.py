"""The webhook receiver on the worker-facing server: ``POST /hooks/<platform>/<study>``.

Thin: the raw body and headers go to :func:`hitkit.running.hooks.receive`, which checks the signature
over the raw bytes and queues the event; the answer goes back at once (the platform's time limit), and
the scheduler acts on the event later, after asking the platform. A refused delivery is 401 and writes
nothing.
"""

from __future__ import annotations

import json

from flask import Blueprint, current_app, jsonify, request

from hitkit.running import hooks

bp = Blueprint("webhooks", __name__)


@bp.post("/hooks/<provider>/<study>")
def receive(provider: str, study: str):
    raw = request.get_data(cache=False)  # the bytes as sent: the signature covers exactly these
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    status, message = hooks.receive(
        current_app.config["HITKIT_DATABASE_URL"], provider, study, request.headers, raw, payload
    )
    if status >= 400:
        current_app.logger.warning("webhook for %s refused (%d): %s", study, status, message)
    return jsonify(result=message), status
