"""gunicorn settings for hitkit's worker pages: ``gunicorn -c ops/gunicorn.conf.py server.wsgi:app``.

The database URL comes from HITKIT_DATABASE_URL and the signing secret from HITKIT_SECRET; every
gunicorn worker must share both (a worker with another secret would refuse the others' tokens).
"""

import multiprocessing
import os

from gunicorn.glogging import Logger

from hitkit.worker.security import redact_path

bind = os.environ.get("HITKIT_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("HITKIT_WEB_WORKERS", str(multiprocessing.cpu_count() * 2 + 1)))
worker_class = "gthread"
# A live-chat turn holds its thread while the bot answers (with no database connection held), so
# threads, not cores, bound how many chats are served at once: 300 workers typing every 3-8 s to
# bots answering in 0.5 s keep about 30 turns in flight. Threads are cheap while they wait.
threads = int(os.environ.get("HITKIT_WEB_THREADS", "32"))
timeout = 60  # a worker process whose main loop stops answering for 60 s is replaced
graceful_timeout = 20
# Slow and idle clients (slowloris): the gthread worker lends each new connection a thread for up to
# 5 s while it waits for the first bytes, then parks it; but a client that stops half-way through its
# headers or body keeps its thread, and gunicorn has no per-read timeout. So gunicorn never faces
# clients: it binds loopback (HITKIT_BIND) behind ops/nginx/hitkit.conf, which times out slow
# clients (client_header_timeout, client_body_timeout, send_timeout), caps connections per address
# and passes on only complete requests (proxy_request_buffering). The caps below bound what gets through.
worker_connections = int(os.environ.get("HITKIT_WEB_CONNECTIONS", "1000"))  # open connections per worker
backlog = 2048
limit_request_line = 8190  # request line, bytes (gunicorn's default, kept explicit)
limit_request_fields = 100  # header fields per request
limit_request_field_size = 8190  # bytes per header field
# Workers type a message every few seconds: an idle keep-alive connection must outlive that pause, or
# the browser's next message races the server's close. 75 s is nginx's default keepalive_timeout.
keepalive = int(os.environ.get("HITKIT_KEEPALIVE_S", "75"))
accesslog = os.environ.get("HITKIT_ACCESS_LOG", "-")


class RedactingLogger(Logger):
    """gunicorn's logger with assignment tokens and query strings (invites, provider ids) redacted
    from every atom that can hold them: the path, the request line, the query and the referer."""

    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        for key in ("U", "r", "f", "{referer}i"):
            if isinstance(atoms.get(key), str):
                atoms[key] = redact_path(atoms[key])
        atoms["q"] = "-"
        return atoms


logger_class = RedactingLogger
access_log_format = '%(h)s "%(m)s %(U)s" %(s)s %(B)s %(M)sms'


def post_worker_init(worker):
    """Keep garbage collection pauses out of chat turns (see server.wsgi.settle_worker)."""
    from server.wsgi import settle_worker

    settle_worker()
