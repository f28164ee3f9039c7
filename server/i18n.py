"""Worker pages in the study's language (``ui_language:``): Flask-Babel set up so that the templates'
``_()`` and ``{% trans %}`` and its number filters read the language of the study a request belongs to.

A worker route names its study; :func:`use` (called where the route loads the study's context) makes
that study's :class:`~hitkit.i18n.catalogs.Words` the request's. Before a study is known (a refusal of
a malformed request) pages are English. The coordinator's dashboard is English whatever the study.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, g
from flask_babel import Babel, Domain
from jinja2.utils import htmlsafe_json_dumps
from markupsafe import Markup

from hitkit.i18n import Message, localise, own
from hitkit.i18n.catalogs import Words, english, words_for
from hitkit.i18n.script_words import SCRIPT_WORDS
from hitkit.study.stored import StudyContext


class _StudyDomain(Domain):
    """Flask-Babel's message domain, reading the request's study catalog instead of an app-wide folder."""

    def get_translations(self):
        return words().translations


def install(app: Flask) -> None:
    """Flask-Babel on ``app``: the locale and catalog of each request are its study's."""
    babel = Babel(app, locale_selector=lambda: words().locale)
    babel.domain_instance = _StudyDomain()  # Flask-Babel's documented seam: a cached_property we set first
    app.jinja_env.policies["ext.i18n.trimmed"] = True  # as `pybabel extract` reads them (babel.cfg)
    app.jinja_env.globals.update(page_language=lambda: words().language, page_direction=lambda: words().direction)
    app.jinja_env.globals["script_words"] = script_words
    app.jinja_env.globals["study_instructions"] = lambda study: study.hit.instructions_for(words().language)
    # A default the study file kept word for word (the pairwise question) is hitkit's and is translated.
    app.jinja_env.globals["own"] = lambda text: words().text(own(text))


def use(ctx: StudyContext) -> Words:
    """Make the study's language the request's (a study's ``ui_language`` never changes once launched)."""
    g.hitkit_words = words_for(ctx.config.ui_language, ctx.config.base_dir)
    return g.hitkit_words


def words() -> Words:
    """The request's words: its study's, else English."""
    return g.get("hitkit_words") or english()


def localised(value: Any) -> Any:
    """A page's data with every sentence hitkit marked put into the request's language."""
    return localise(value, words())


def error_text(exc: BaseException) -> str:
    """A refusal's message in the request's language (an unmarked message stays as it is)."""
    first = exc.args[0] if exc.args else None
    return words().text(first) if isinstance(first, Message) else str(exc)


def script_words() -> Markup:
    """The sentences the pages' scripts show, in the request's language, as JSON for ``<script type=application/json>``
    (placeholders stay ``%(name)s``: the script fills them in, numbers formatted for the page's language)."""
    table = {key: words().gettext(message.msgid) for key, message in SCRIPT_WORDS.items()}
    return htmlsafe_json_dumps(table, ensure_ascii=False)
