"""Worker pages name a piece of work in the platform's own word: Prolific's participants take a "study",
a panel's annotators a "task", MTurk's workers a "HIT"."""

from __future__ import annotations

from types import SimpleNamespace

import jinja2
import pytest

from hitkit.study.provider_sections import ProviderConfig
from tests.studies import REPO


@pytest.mark.parametrize(("kind", "word"), [("prolific", "study"), ("local", "task"), ("mturk", "HIT")])
def test_the_return_button_and_page_use_the_platforms_word(kind, word):
    provider = ProviderConfig(kind=kind)
    assert provider.work_word == word
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(REPO / "hit_templates"), extensions=["jinja2.ext.i18n"])
    env.install_null_translations(newstyle=True)  # English, as the message ids are (server/i18n.py installs the rest)
    env.policies["ext.i18n.trimmed"] = True
    env.globals.update(url_for=lambda *_a, **_k: "/x", csrf_value=lambda _t: "c", CSRF_FIELD="csrf")
    env.globals.update(page_language=lambda: "en", page_direction=lambda: "ltr", script_words=lambda: "{}")
    study = SimpleNamespace(study="s", provider=provider, hit=SimpleNamespace(title="A task"))
    button = env.get_template("_return.html").render(study=study, token="t")
    assert f"Return this {word} without finishing" in button
    assert "HIT" not in button or word == "HIT"
    page = env.get_template("returned.html").render(study=study)
    assert f"You returned this {word}" in page
