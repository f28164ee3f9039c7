"""No worker page shows English that is not in the catalogs.

tests/test_i18n_catalogs.py checks the strings hitkit *marks*; a sentence left unmarked in a template never
reaches messages.pot, so it passed there (ranking's pages did, all in English). Here every worker page of every
protocol (preview, instructions, task, a refused submit, the returned and thank-you pages) is rendered in a
pseudo-language: a study catalog (``eo``) whose every entry is its English written in fullwidth letters
(``Submit`` -> ``Ｓｕｂｍｉｔ``). Then a page may hold Latin letters only where the study supplied the text
(its material, its title and description, as stored in the database); any other word in a text node or an
accessible attribute (aria-label, title, placeholder, alt) is a string nobody marked for translation.
The scripts' sentences are covered by the words table (``script_words``) and by the scan of their literals."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from babel.messages.pofile import read_po, write_po
from sqlalchemy import select, update

from hitkit.bots.server import BotServer
from hitkit.db.models import Assignment, Hit, Study, Turn, Unit
from hitkit.db.session import dispose_engines, session_scope
from hitkit.i18n.catalogs import SHIPPED_DIR
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from tests.streaming_bot import Typist
from tests.studies import REPO, pairwise_study
from tests.test_arena_study import arena_study
from tests.test_live_chat_study import REAL as CHAT_BOTS
from tests.test_live_chat_study import live_chat_study
from tests.test_ranking import starter_study
from tests.test_rating import rating_study
from tests.test_spot_the_bot_study import stb_study

PSEUDO = "eo"
"""A language no catalog ships, so that every word on the page comes from the pseudo catalog."""
WORD = re.compile(r"[A-Za-z]{2,}")
"""Two Latin letters in a row: a word (single letters are the replies' labels A–F)."""
CHECKED_ATTRIBUTES = ("aria-label", "title", "placeholder", "alt", "aria-valuetext")
SKIPPED = {"script", "style", "kbd"}  # the scripts' JSON table, styles, key caps (Enter, 1, 2)
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
_KEEP = re.compile(r"(%\(\w+\)[sd]|<[^>]+>|&\w+;)")


def pseudo(text: str) -> str:
    """``text`` with every Latin letter in fullwidth, its placeholders, tags and entities kept."""
    return "".join(
        part if _KEEP.fullmatch(part) else re.sub(r"[A-Za-z]", lambda m: chr(ord(m.group()) + 0xFEE0), part)
        for part in _KEEP.split(text)
    )


def write_pseudo_catalog(study_dir: Path) -> None:
    """translations/eo/LC_MESSAGES/messages.po next to the study file: every entry of messages.pot, in fullwidth."""
    with (SHIPPED_DIR / "messages.pot").open("rb") as fp:
        catalog = read_po(fp, locale=PSEUDO)
    for message in catalog:
        if message.id:
            message.string = pseudo(message.id)
    folder = study_dir / "translations" / PSEUDO / "LC_MESSAGES"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "messages.po").open("wb") as fp:
        write_po(fp, catalog)


class _Text(HTMLParser):
    """The text nodes and checked attribute values of a page, outside <script>, <style> and <kbd>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value and (name in CHECKED_ATTRIBUTES or (name == "value" and ("type", "submit") in attrs)):
                self.found.append(value)
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            del self.open[len(self.open) - 1 - self.open[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        if not SKIPPED & set(self.open) and data.strip():
            self.found.append(data)


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def english_left(html: str, supplied: str) -> list[str]:
    """The text nodes and attributes of ``html`` that hold a Latin word and are not text the study supplied
    (``supplied``: every string of the study's material and settings, one per line, whitespace squeezed)."""
    parser = _Text()
    parser.feed(html)
    left = []
    for text in parser.found:
        text = _squeeze(text)
        if WORD.search(text) and not re.search(rf"^{re.escape(text)}$", supplied, re.M):
            left.append(text)
    return left


def script_english(html: str) -> list[str]:
    """The sentences of the page's scripts' table (``script_words``) that are not in the page's language."""
    table = re.search(r'<script type="application/json" id="hitkit-words">(.*?)</script>', html, re.S)
    assert table, "no scripts' words table on the page"
    return [text for text in json.loads(table.group(1)).values() if WORD.search(re.sub(r"%\(\w+\)s", "", text))]


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def supplied_text(url: str, study: str, config) -> str:
    """Every string the study supplied, as stored (units, conversations, the degraded copies of its
    assignments' layouts) and as written (its settings and the files they name), one per line."""
    found = list(_strings(config.model_dump(mode="json")))
    for value in list(found):
        path = config.path(Path(value)) if "/" in value or "." in value else None
        if path is not None and path.is_file() and path.stat().st_size < 5_000_000:
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    found += list(_strings(json.loads(line)))
                except ValueError:
                    found.append(line)
    with session_scope(url) as s:
        study_id = s.scalar(select(Study.id).where(Study.name == study))
        for payload in s.scalars(select(Unit.payload).where(Unit.study_id == study_id)):
            found += list(_strings(payload))
        found += list(s.scalars(select(Turn.text)))
        found += list(_strings(list(s.scalars(select(Assignment.layout).join(Hit).where(Hit.study_id == study_id)))))
    return "\n".join(_squeeze(text) for text in found)


@pytest.fixture(scope="module")
def studies(tmp_path_factory, sqlite_template):
    """The six protocols' studies in the pseudo-language, in one database, and the app serving them."""
    root = tmp_path_factory.mktemp("pseudo")
    shutil.copy(sqlite_template, root / "hitkit.db")
    url = f"sqlite:///{root / 'hitkit.db'}"
    with BotServer({n: Typist(n, step_s=0.01) for n in [*CHAT_BOTS, "qc"]}, port=0) as bots:
        for name in "prscak":
            (root / name).mkdir()
        files = [
            pairwise_study(root / "p", url, pairwise={"prompts_per_hit": 3}),
            rating_study(root / "r", url),
            stb_study(root / "s", url, segments_per_hit=4, human_count=4),
            live_chat_study(root / "c", url, bots.url, hits=5, slots_per_hit=2, min_inputs=1),
            arena_study(root / "a", url, bots.url, hits=2, battles_per_hit=1, control_share=0),
            starter_study(root / "k", url),
        ]
        secret = resolve_secret(url)
        configs = {}
        for path in files:
            path = Path(path)
            data = yaml.safe_load(path.read_text())
            data["ui_language"] = PSEUDO
            path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
            write_pseudo_catalog(path.parent)
            config = load_study(path)
            with session_scope(url) as s:
                ctx = create_study(s, config, path, secret)
                s.get(Study, ctx.study_id).status = "running"
            configs[config.study] = config
        from server import create_app

        app = create_app(url, secret)
        for name in configs:
            tick(url, name, "http://127.0.0.1:9")
        yield url, app, configs
    dispose_engines()


def worker_pages(client, url: str, study: str, who: str = "W") -> dict[str, str]:
    """Every page a worker of ``study`` can see, by name: the preview, the instructions, the task, a
    refused submit, the returned page and the thank-you page."""
    with session_scope(url) as s:
        hits = s.scalars(select(Hit.id).join(Study).where(Study.name == study).order_by(Hit.index)).all()
    pages = {}

    def get(name: str, response) -> str:
        assert response.status_code in (200, 400, 409), (study, name, response.status_code, response.get_data()[:300])
        pages[name] = response.get_data(as_text=True)
        return pages[name]

    get("preview", client.get(f"/s/{study}/hit/{hits[0]}?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h"))
    for n, worker in enumerate((f"{who}-done", f"{who}-back")):
        for hit in hits:  # the first HIT with a free place (a full one refuses the worker: a page too)
            entered = client.get(
                f"/s/{study}/hit/{hit}?assignmentId={worker}-A&hitId=h&workerId={worker}", follow_redirects=True
            )
            if entered.request.path.startswith("/a/"):
                break
            get("HIT taken", entered)
        task = entered.request.path
        assert task.startswith("/a/") and entered.status_code == 200, (
            study,
            worker,
            _back(entered.get_data(as_text=True)),
        )
        if n == 0:
            get("instructions", entered)
            get("task", client.post(task + "consent", follow_redirects=True))
            get("refused submit", client.post(task + "submit", headers={"Accept": "text/html"}))
            with session_scope(url) as s:
                s.execute(
                    update(Assignment)
                    .where(Assignment.provider_assignment_id == f"{worker}-A")
                    .values(status="submitted")
                )
            get("thank-you", client.get(task))
        else:
            client.post(task + "consent")
            get("returned", client.post(task + "return"))
    return pages


def test_every_worker_page_of_every_protocol_is_all_catalog_or_study_text(studies):
    url, app, by_study = studies
    assert len(by_study) == 6
    english = []
    for study, config in by_study.items():
        pages = worker_pages(app.test_client(), url, study)
        supplied = supplied_text(url, study, config)
        for name, html in pages.items():
            assert f'<html lang="{PSEUDO}" dir="ltr">' in html, (study, name)
            assert re.search("[\uff21-\uff5a]{3}", html), f"{study} {name}: no catalog text on the page"
            english += [f"{study} {name}: {text!r}" for text in english_left(html, supplied)]
            english += [f"{study} {name}: script words {text!r}" for text in script_english(html)]
    assert english == [], "worker-visible English not marked for translation:\n" + "\n".join(english)


def test_an_unmarked_sentence_planted_in_a_page_is_found(studies, tmp_path):
    """The check fails on what it is for: ranking's page with one unmarked sentence and one unmarked
    aria-label, served by the real app, is caught; its material and its marked sentences are not."""
    url, app, by_study = studies
    page = (REPO / "hit_templates" / "ranking.html").read_text(encoding="utf-8")
    planted = page.replace(
        '<p id="announce"', '<p class="hint">Drag the replies</p><p aria-label="Order of replies" id="announce"'
    )
    assert planted != page
    (tmp_path / "ranking.html").write_text(planted, encoding="utf-8")
    app.jinja_env.loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(tmp_path)), app.jinja_env.loader])
    app.jinja_env.cache.clear()
    try:
        task = worker_pages(app.test_client(), url, "my-ranking-study", who="planted")["task"]
    finally:
        app.jinja_env.loader = app.jinja_env.loader.loaders[1]
        app.jinja_env.cache.clear()
    supplied = supplied_text(url, "my-ranking-study", by_study["my-ranking-study"])
    assert english_left(task, supplied) == ["Drag the replies", "Order of replies"]


def test_the_check_tells_catalog_and_study_text_from_unmarked_english():
    supplied = "What should I cook tonight?\nPut chatbot replies in order"
    html = (
        "<html><body><h1>Put chatbot replies in order</h1><p>What should I cook tonight?</p>"
        f"<button>{pseudo('Move up')}<kbd>Enter</kbd></button><span>A</span><span>1 / 3</span>"
        "<script>const s = 'saving';</script><p>cook</p><li aria-label='Reply A'>x</li>"
        "<input type=submit value='Send'></body></html>"
    )
    # "cook" is a word of the material, but not a whole text the study supplied: an unmarked word all the same.
    assert english_left(html, supplied) == ["cook", "Reply A", "Send"]


def _back(text: str) -> str:
    return re.sub("[\uff21-\uff5a]", lambda m: chr(ord(m.group()) - 0xFEE0), text)


# The scripts --------------------------------------------------------------------------------------------------

WORKER_SCRIPTS = sorted(
    p for p in (REPO / "hit_templates" / "static").glob("*.js") if p.name not in ("dashboard.js", "words.js")
)
"""The worker pages' scripts (the dashboard's is the coordinator's, in English; words.js is the table's reader)."""
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|`(?:[^`\\]|\\.)*`|//[^\n]*|/\*.*?\*/', re.S)
_SENTENCE = re.compile(r"[A-Za-z]{2,}[,;:!?'’]?\s+[A-Za-z]{2,}")
_SELECTOR = re.compile(r"[.#][A-Za-z_]|\[[\w-]+[=\]]")
"""A CSS selector's class, id or attribute (``li.rank-item``, ``#submit``, ``[data-step]``)."""
_SHOWN = re.compile(r"textContent|innerText|innerHTML|placeholder|title|announce\(|alert\(|setAttribute\(")


def _in_call(prefix: str) -> str:
    """The method or function whose call is still open at the end of ``prefix`` ("" if none), with a comma
    after it when the literal is not its first argument (``setAttribute,``)."""
    depth = 0
    for i in range(len(prefix) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(prefix[i], 0)
        if depth < 0:
            name = re.search(r"(\w*)\s*$", prefix[:i]).group(1)
            return name + ("," if "," in prefix[i:] else "")
    return ""


def scripts_english(source: str) -> list[str]:
    """The string literals of a script that put English on the page: any with two words in a row that is not
    a selector, and any word in a statement that writes text or an accessible name. Sentences come from
    ``window.hitkitT(key)`` instead (hitkit/i18n/script_words.py)."""
    found = []
    for m in _TOKEN.finditer(source):
        token = m.group()
        if token.startswith(("//", "/*")) or token[1:-1] == "use strict":
            continue
        body = re.sub(r"\$\{[^}]*\}", " X ", token[1:-1])
        statement = re.split(r"[;{}\n]", source[: m.start()])[-1]
        if _SELECTOR.search(body) or _in_call(statement) in ("t", "hitkitT", "setAttribute", "t,", "hitkitT,"):
            continue  # a selector, a sentence's key, an attribute's name
        if _SENTENCE.search(body) or (WORD.search(body) and _SHOWN.search(statement)):
            found.append(token)
    return found


@pytest.mark.parametrize("script", WORKER_SCRIPTS, ids=lambda p: p.name)
def test_worker_scripts_write_no_english_of_their_own(script):
    assert scripts_english(script.read_text(encoding="utf-8")) == []


def test_the_script_scan_finds_planted_english():
    source = (REPO / "hit_templates" / "static" / "ranking.js").read_text(encoding="utf-8")
    planted = source.replace(
        'status.textContent = t("saving");',
        'status.textContent = reply ? "saving…" : t("saving"); announce(`Reply ${label} moved to place ${n}.`);',
    )
    assert planted != source and scripts_english(source) == []
    assert scripts_english(planted) == ['"saving…"', "`Reply ${label} moved to place ${n}.`"]
