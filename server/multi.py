"""One server, one dashboard, several databases (``hitkit serve --db a.db --db b.db`` or a runs folder).

Each database keeps its own app (its own secret signs its workers' tokens); a dispatcher sends
every request that names a study (``/s/STUDY/…``, ``/a/STUDY/…``, ``/dashboard/study/STUDY/…``,
``?study=STUDY``) to the app of the database holding it, and everything else to the first app.
The dashboard's pages that list studies read every database, and one coordinator login, signed
with a secret the apps share for the dashboard only, holds across all of them.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from hitkit.db.models import Study
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError

_STUDY_IN_PATH = re.compile(r"^/(?:s|a|dashboard/study)/([^/]+)")
RESCAN_S = 2.0
"""How often, at most, a runs folder is looked at again for studies launched since the server started."""
log = logging.getLogger(__name__)


def databases_in(folder: Path) -> list[str]:
    """The database URL of every ``STUDY/hitkit.db`` in a runs folder."""
    from hitkit.study.served import database_url_of

    return [database_url_of(str(p)) for p in sorted(Path(folder).glob("*/hitkit.db"))]


class StudyDispatcher:
    """WSGI: route a request to the app of the database that holds the study it names."""

    def __init__(self, apps: dict, urls: list[str], folders: tuple[Path, ...] = (), make=None):
        self.apps, self.urls = apps, urls
        self.folders, self._make = folders, make
        self._where: dict[str, str] = {}
        self._lock = threading.Lock()
        self._scanned = time.monotonic()

    def refresh(self) -> None:
        """Serve the databases that appeared in the runs folders since the last look (at most every
        ``RESCAN_S``): a study launched into ``runs/`` after ``hitkit serve --db runs`` started."""
        if not self.folders or self._make is None:
            return
        with self._lock:
            if time.monotonic() - self._scanned < RESCAN_S:
                return
            self._scanned = time.monotonic()
        for url in (u for folder in self.folders for u in databases_in(folder)):
            if url in self.apps:
                continue
            try:
                app = self._make(url)
            except (SQLAlchemyError, HitkitError, OSError) as exc:  # still being created: looked at again later
                log.info("not serving %s yet: %s", url, exc)
                continue
            with self._lock:
                self.apps[url] = app
                self.urls.append(url)  # the list every app's dashboard reads

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
        if study is None and environ.get("PATH_INFO", "").startswith("/dashboard"):
            self.refresh()  # the pages that list studies
        url = self._database_of(study) if study else None
        if study and url is None:
            self.refresh()
            url = self._database_of(study)
        return self.apps[url or self.urls[0]](environ, start_response)


def create_multi_app(urls: list[str], folders: tuple[Path, ...] = ()):
    """The WSGI app serving every study of the databases at ``urls`` under one dashboard; with
    ``folders`` (runs folders), studies launched into them later are served too."""
    from server import create_app

    urls = list(urls)  # one list for every app's dashboard, grown by the dispatcher
    apps = {url: create_app(url) for url in urls}
    shared = apps[urls[0]].config["HITKIT_SECRET"]

    def join(app):
        app.config["HITKIT_DASHBOARD_SECRET"] = shared
        app.config["HITKIT_DASHBOARD_DATABASES"] = urls
        app.config["HITKIT_DASHBOARD_DATABASE"] = urls[0]  # one login, one logout, for every database
        return app

    for app in apps.values():
        join(app)
    return StudyDispatcher(apps, urls, tuple(folders), make=lambda url: join(create_app(url)))
