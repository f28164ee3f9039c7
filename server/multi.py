"""One server, one dashboard, several databases (``hitkit serve --db a.db --db b.db`` or a runs folder).

Each database keeps its own app (its own secret signs its workers' tokens); a dispatcher sends
every request that names a study (``/s/STUDY/…``, ``/a/STUDY/…``, ``/dashboard/study/STUDY/…``,
``?study=STUDY``) to the app of the database holding it, and everything else to the first app.
The dashboard's pages that list studies read every database, and one coordinator login, signed
with a secret the apps share for the dashboard only, holds across all of them.
"""
from __future__ import annotations

import re
import threading
from urllib.parse import parse_qs

from sqlalchemy import select

from hitkit.db.models import Study
from hitkit.db.session import session_scope

_STUDY_IN_PATH = re.compile(r"^/(?:s|a|dashboard/study)/([^/]+)")


class StudyDispatcher:
    """WSGI: route a request to the app of the database that holds the study it names."""

    def __init__(self, apps: dict, urls: list[str]):
        self.apps, self.urls = apps, urls
        self._where: dict[str, str] = {}
        self._lock = threading.Lock()

    def _study_of(self, environ) -> str | None:
        match = _STUDY_IN_PATH.match(environ.get("PATH_INFO", ""))
        if match:
            return match.group(1)
        study = parse_qs(environ.get("QUERY_STRING", "")).get("study")
        return study[0] if study else None

    def _database_of(self, study: str) -> str | None:
        with self._lock:
            if study in self._where:
                return self._where[study]
        for url in self.urls:  # a study launched since the server started is found too
            with session_scope(url) as session:
                if session.scalar(select(Study.id).where(Study.name == study)) is not None:
                    with self._lock:
                        self._where[study] = url
                    return url
        return None

    def __call__(self, environ, start_response):
        study = self._study_of(environ)
        url = self._database_of(study) if study else None
        return self.apps[url or self.urls[0]](environ, start_response)


def create_multi_app(urls: list[str]):
    """The WSGI app serving every study of the databases at ``urls`` under one dashboard."""
    from server import create_app

    apps = {url: create_app(url) for url in urls}
    shared = apps[urls[0]].config["HITKIT_SECRET"]
    for app in apps.values():
        app.config["HITKIT_DASHBOARD_SECRET"] = shared
        app.config["HITKIT_DASHBOARD_DATABASES"] = list(urls)
        app.config["HITKIT_DASHBOARD_DATABASE"] = urls[0]  # one login, one logout, for every database
    return StudyDispatcher(apps, urls)
