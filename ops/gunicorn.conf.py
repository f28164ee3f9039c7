"""gunicorn settings for hitkit's worker pages: ``gunicorn -c ops/gunicorn.conf.py server.wsgi:app``.

The database URL comes from HITKIT_DATABASE_URL and the signing secret from HITKIT_SECRET; every
gunicorn worker must share both (a worker with another secret would refuse the others' tokens).
"""
import multiprocessing
import os

bind = os.environ.get("HITKIT_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("HITKIT_WEB_WORKERS", multiprocessing.cpu_count() * 2 + 1))
worker_class = "gthread"
threads = int(os.environ.get("HITKIT_WEB_THREADS", 8))
timeout = 60
graceful_timeout = 20
keepalive = 5
accesslog = "-"
# Query strings carry provider ids, never secrets; tokens sit in the path, so log only the path's route.
access_log_format = '%(h)s "%(m)s %(U)s" %(s)s %(B)s %(M)sms'
