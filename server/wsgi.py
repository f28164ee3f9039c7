"""WSGI entry point for gunicorn: ``gunicorn -c ops/gunicorn.conf.py server.wsgi:app``."""

import gc
import os
import sys

from server import create_app

if "HITKIT_DATABASE_URL" not in os.environ:
    raise RuntimeError("set HITKIT_DATABASE_URL to the study database, e.g. postgresql://hitkit@db/hitkit")
app = create_app(os.environ["HITKIT_DATABASE_URL"])


def settle_worker() -> None:
    """Import what requests import lazily, then hide every object made so far from the garbage collector.

    A web worker holds some 200 000 long-lived objects (Flask, SQLAlchemy, pandas for the task
    types); each full collection walked them all and paused every thread of the worker for 0.2-0.4 s
    on 2 busy cores, the worst of a chat turn's latency. Frozen objects are never walked again, and
    a larger first generation makes young collections rarer. Called from gunicorn's
    ``post_worker_init`` (ops/gunicorn.conf.py).
    """
    import hitkit.bots.client
    import hitkit.protocols.live_chat.task  # noqa: F401 - StudyContext.load imports one of the three
    import hitkit.protocols.pairwise.task  # noqa: F401
    import hitkit.protocols.spot_the_bot.task  # noqa: F401
    import hitkit.worker.chat  # noqa: F401

    with app.app_context():
        for name in ("live_chat.html", "pairwise.html", "spot_the_bot.html", "error.html", "done.html"):
            app.jinja_env.get_template(name)  # compiled once here, not under the first worker's request
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)
    sys.setswitchinterval(float(os.environ.get("HITKIT_SWITCH_INTERVAL_S", "0.0005")))
