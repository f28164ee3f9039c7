"""Every shipped language, every protocol, in chromium: the pages say their language and direction
(<html lang dir>), read in that language and pass axe-core's WCAG 2.2 AA audit, and a HIT is done with the
keyboard alone. Every language opens every protocol's HIT (instructions, consent by keyboard, the task's
first screen, each audited) and does a whole pairwise HIT to its thank-you page; the right-to-left
language and a non-Latin script (INTERACTIVE; English in tests/test_browser_a11y.py) do every protocol's
HIT to the end. The keyboard code is the same in every language, and every catalog is checked complete
and well-formed by tests/test_i18n_catalogs.py: a whole HIT in each of the other languages checked
nothing more and took most of this module's time. One database, one web server and one browser per
language serve its six studies; the Arabic pass also photographs the right-to-left arena, live chat and
ranking at desktop width and at 390 px (docs/img/)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select

from hitkit.bots.server import BotServer
from hitkit.db.models import Assignment, Hit, Study
from hitkit.db.session import dispose_engines, session_scope
from hitkit.i18n.catalogs import Words, shipped_languages
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from tests.axe import assert_accessible, tab_to
from tests.browser import CHROMIUM_ARGS, chromium_path
from tests.streaming_bot import Typist
from tests.studies import pairwise_study
from tests.test_arena_study import arena_study
from tests.test_live_chat_study import REAL as CHAT_BOTS
from tests.test_live_chat_study import live_chat_study
from tests.test_ranking import starter_study as ranking_study
from tests.test_rating import rating_study
from tests.test_spot_the_bot_study import stb_study

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser

LANGUAGES = [lang for lang in shipped_languages() if lang != "en"]  # English: tests/test_browser_a11y.py
INTERACTIVE = ["ar", "zh"]
"""Right to left, and a non-Latin script: each protocol's HIT is done to the end by keyboard in these."""
OPENED = [lang for lang in LANGUAGES if lang not in INTERACTIVE]
"""The other languages: each protocol's HIT is opened and audited (its end is a pairwise HIT's)."""
in_interactive_languages = pytest.mark.parametrize("served_language", INTERACTIVE, indirect=True)
DOCS_IMG = Path(__file__).resolve().parents[1] / "docs" / "img"
ARABIC = "مرحبًا! يسعدني أن أتحدث معك اليوم عن هذا الموضوع الجميل وأن أسمع رأيك فيه بالتفصيل".split()


class ArabicTypist(Typist):
    """A bot that answers in Arabic, word by word: the streamed text of a right-to-left page."""

    def words(self, request):
        return [ARABIC[i % len(ARABIC)] for i in range(request.reply_budget)]


@pytest.fixture(scope="module")
def bots():
    with BotServer({n: ArabicTypist(n, step_s=0.04) for n in [*CHAT_BOTS, "qc"]}, port=0) as server:
        yield server.url


def _in_language(path, language: str, **changes) -> Path:
    data = yaml.safe_load(Path(path).read_text())
    for section, values in changes.items():
        data[section] = {**(data.get(section) or {}), **values}
    data["ui_language"] = language
    Path(path).write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return Path(path)


@pytest.fixture(scope="module", params=LANGUAGES)
def served_language(request, tmp_path_factory, bots, sqlite_template):
    """The six protocols' studies in one language, in one database, behind one web server and one browser."""
    from server.embedded import WebServer

    language = request.param
    root = tmp_path_factory.mktemp(f"lang-{language}")
    shutil.copy(sqlite_template, root / "hitkit.db")  # the migrated empty database every test starts from
    url = f"sqlite:///{root / 'hitkit.db'}"
    (root / "p").mkdir(), (root / "r").mkdir(), (root / "s").mkdir(), (root / "c").mkdir(), (root / "a").mkdir()
    files = [
        _in_language(pairwise_study(root / "p", url), language, pairwise={"prompts_per_hit": 3}),
        _in_language(rating_study(root / "r", url), language, rating={"items_per_hit": 2, "degraded_per_hit": 1}),
        _in_language(stb_study(root / "s", url, segments_per_hit=4, human_count=4), language),
        _in_language(live_chat_study(root / "c", url, bots, hits=5, slots_per_hit=2, min_inputs=1), language),
        _in_language(arena_study(root / "a", url, bots, hits=1, battles_per_hit=1, control_share=0), language),
        _in_language(ranking_study(root / "k", url), language, ranking={"prompts_per_hit": 3, "degraded_per_hit": 1}),
    ]
    secret = resolve_secret(url)
    configs = [load_study(f) for f in files]
    for config, path in zip(configs, files):
        with session_scope(url) as s:
            ctx = create_study(s, config, path, secret)
            s.get(Study, ctx.study_id).status = "running"
    web = WebServer(url, "127.0.0.1", 0, 8, secret).start()
    for config in configs:
        tick(url, config.study, web.url)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1000, "height": 900})
        yield language, web.url, url, page
        browser.close()
    web.stop()
    dispose_engines()


def enter(page, base: str, url: str, study: str, worker: str, language: str) -> Words:
    """Arrive, check the page's language, audit the instructions, Tab to "I agree" and press Enter."""
    words = Words(language)
    with session_scope(url) as s:  # six studies share the database: each has its own first HIT
        hit = s.scalar(select(Hit.id).join(Study).where(Study.name == study).order_by(Hit.index).limit(1))
    page.goto(f"{base}/s/{study}/hit/{hit}?assignmentId={worker}-A&hitId=h{hit}&workerId={worker}")
    assert page.evaluate("() => [document.documentElement.lang, document.documentElement.dir]") == [
        language,
        words.direction,
    ]
    page.get_by_text(words.gettext("I agree — start the task")).wait_for()
    assert_accessible(page, f"{study} instructions ({language})")
    tab_to(page, "#consent")
    page.keyboard.press("Enter")
    return words


def finish(page, words: Words, where: str) -> None:
    """Type a comment, Tab to Submit, Enter: the thank-you page in the language passes the audit."""
    tab_to(page, "#hit-feedback")
    page.keyboard.type("ok")
    tab_to(page, "#submit")
    page.keyboard.press("Enter")
    page.get_by_text(words.gettext("Thank you — your work is submitted")).wait_for()
    assert_accessible(page, f"{where} thank-you page")


def submitted(url: str, worker: str) -> bool:
    with session_scope(url) as s:
        return (
            s.scalar(select(Assignment.status).where(Assignment.provider_assignment_id == f"{worker}-A")) == "submitted"
        )


def test_pairwise_by_keyboard_in_each_language(served_language):
    language, base, url, page = served_language
    words = enter(page, base, url, "ab-demo", "K-P", language)
    page.get_by_text(words.gettext("Which response is better?")).first.wait_for()
    assert_accessible(page, f"pairwise task ({language})")
    units = page.locator("fieldset.unit")
    for i in range(units.count()):
        if units.nth(i).locator("input[type=radio]").count():
            tab_to(page, f'fieldset.unit[data-unit="{units.nth(i).get_attribute("data-unit")}"] input[type=radio]')
            page.keyboard.press("Space")
            units.nth(i).locator(".saved", has_text=words.gettext("saved")).wait_for()
    finish(page, words, f"pairwise ({language})")
    assert submitted(url, "K-P")


@in_interactive_languages
def test_rating_by_keyboard_in_each_language(served_language):
    language, base, url, page = served_language
    words = enter(page, base, url, "da-demo", "K-R", language)
    page.get_by_text(words.gettext("strongly disagree")).first.wait_for()
    assert_accessible(page, f"rating task ({language})")
    sliders = page.locator("input[type=range]")
    for i in range(sliders.count()):
        tab_to(page, f'input[name="{sliders.nth(i).get_attribute("name")}"]')
        page.keyboard.press("ArrowRight")
    page.wait_for_function("() => !document.querySelector('.slider.untouched')")
    finish(page, words, f"rating ({language})")
    assert submitted(url, "K-R")


@in_interactive_languages
def test_spot_the_bot_by_keyboard_in_each_language(served_language):
    language, base, url, page = served_language
    words = enter(page, base, url, "stb-demo", "K-S", language)
    total = int(page.locator("#stb-total").inner_text())
    for i in range(total):
        page.locator("#stb-step-labels").wait_for(state="visible")
        page.locator("#stb-turns .who", has_text=words.gettext("Speaker A")).first.wait_for()
        if i == 0:
            assert_accessible(page, f"Spot The Bot labels ({language})")
        page.keyboard.press("1")
        page.keyboard.press("2")
        page.keyboard.press("Enter")
        page.locator("#stb-step-preferences").wait_for(state="visible")
        if i == 0:
            assert_accessible(page, f"Spot The Bot preferences ({language})")
        for key in "123":
            page.keyboard.press(key)
        page.keyboard.press("Enter")
    page.locator("#stb-finished").wait_for(state="visible")
    finish(page, words, f"Spot The Bot ({language})")
    assert submitted(url, "K-S")


def shoot(page, name: str) -> None:
    """The page at desktop width and at 390 px (a phone), into docs/img/ (the languages how-to shows them)."""
    page.set_viewport_size({"width": 1280, "height": 900})
    page.screenshot(path=str(DOCS_IMG / f"{name}-desktop.png"))
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(DOCS_IMG / f"{name}-390.png"), full_page=True)
    page.set_viewport_size({"width": 1000, "height": 900})


@in_interactive_languages
def test_live_chat_by_keyboard_in_each_language(served_language):
    language, base, url, page = served_language
    words = enter(page, base, url, "chat-demo", "K-C", language)
    slots = 0
    while page.locator("#step-submit").is_hidden():
        page.locator("#step-topic").wait_for(state="visible")
        assert words.gettext("Chatbot %(n)s") % {"n": slots + 1} in page.locator("#progress").inner_text()
        tab_to(page, "#topic-input")
        page.keyboard.type("البحر" if language == "ar" else "the sea")
        tab_to(page, "input[name=sentiment]")
        page.keyboard.press("Space")
        tab_to(page, "#start-chat")
        page.keyboard.press("Enter")
        page.locator("#step-chat").wait_for(state="visible")
        tab_to(page, "#message")
        page.keyboard.type("هل تحب البحر؟" if language == "ar" else "Do you like the sea?")
        page.keyboard.press("Enter")
        if slots == 0 and language == "ar":
            page.wait_for_function(
                "() => (document.querySelector('#messages li.bot-typing') || {}).textContent?.split(' ').length >= 6"
            )
            shoot(page, "rtl-live-chat-streaming")
        page.locator("#messages li.bot").first.wait_for()
        if slots == 0:
            assert_accessible(page, f"live chat conversation ({language})")
        page.wait_for_function("() => !document.querySelector('#next-bot').disabled")
        tab_to(page, "#next-bot")
        page.keyboard.press("Enter")
        page.locator("#step-rate").wait_for(state="visible")
        if slots == 0:
            assert_accessible(page, f"live chat ratings ({language})")
        for k in range(page.locator("#sliders input[type=range]").count()):
            tab_to(page, f"#sliders .slider:nth-child({k + 1}) input")
            page.keyboard.press("ArrowRight")
        tab_to(page, "#save-ratings")
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.querySelector('#step-rate').hidden")
        slots += 1
    finish(page, words, f"live chat ({language})")
    assert submitted(url, "K-C") and slots == 2


@in_interactive_languages
def test_arena_by_keyboard_in_each_language(served_language):
    language, base, url, page = served_language
    words = enter(page, base, url, "arena-demo", "K-A", language)
    page.locator(".battle-label", has_text=words.gettext("Battle %(n)s") % {"n": 1}).wait_for()
    page.wait_for_function("() => document.querySelector('#arena-message').value.length > 0")
    tab_to(page, "#arena-message")
    page.keyboard.press("Enter")
    if language == "ar":
        page.wait_for_function(
            "() => ['a', 'b'].every(s => { const li = document.querySelector("
            "`.arena-side[data-side=\"${s}\"] li.bot-typing`); return li && li.textContent.split(' ').length >= 6; })"
        )
        shoot(page, "rtl-arena-streaming")
    page.wait_for_function("() => !document.querySelector('button.vote').disabled")
    assert_accessible(page, f"arena battle, both replies in ({language})")
    tab_to(page, 'button.vote[data-vote="a"]')
    page.keyboard.press("Enter")
    page.locator("#arena-voted", has_text=words.gettext("A is better")).wait_for()
    if language == "ar":
        shoot(page, "rtl-arena-voted")
    tab_to(page, "#arena-next")
    page.keyboard.press("Enter")
    page.locator("#step-submit").wait_for(state="visible")
    finish(page, words, f"arena ({language})")
    assert submitted(url, "K-A")


@in_interactive_languages
def test_ranking_by_keyboard_in_each_language(served_language):
    language, base, url, page = served_language
    words = enter(page, base, url, "my-ranking-study", "K-K", language)
    page.locator("h1", has_text=words.gettext("Put the replies in order")).wait_for()
    page.get_by_text(words.gettext("Put the responses in order, best first.")).first.wait_for()  # the default question
    assert_accessible(page, f"ranking task ({language})")
    units = page.locator("fieldset.unit")
    for u in range(units.count()):
        unit = units.nth(u)
        items = unit.locator("li.rank-item")
        first, total = items.nth(0).get_attribute("data-label"), items.count()
        where = f'fieldset[data-unit="{unit.get_attribute("data-unit")}"] li[data-label="{first}"]'
        tab_to(page, f'{where} button[data-step="1"]')  # its Move down button, by name in the language
        assert page.evaluate("() => document.activeElement.textContent").startswith(
            words.gettext("Move down<span class=\"visually-hidden\"> reply %(label)s</span>").split("<")[0]
        )
        page.keyboard.press("Space")
        moved = words.gettext("Reply %(label)s moved to place %(place)s of %(total)s.")
        page.locator("#announce", has_text=moved % {"label": first, "place": 2, "total": total}).wait_for()
        unit.locator(".saved", has_text=words.gettext("saved")).wait_for()
        if u == 0 and language == "ar":
            shoot(page, "rtl-ranking")
    progress = words.gettext('<span id="ranked">0</span> of %(total)s in order').split("</span>")[-1]
    assert progress % {"total": units.count()} in page.locator("p.progress").inner_text()
    finish(page, words, f"ranking ({language})")
    assert submitted(url, "K-K")


@pytest.mark.parametrize("served_language", OPENED, indirect=True)
def test_every_protocols_hit_opens_in_each_language(served_language):
    """The HITs the languages outside INTERACTIVE do not finish (their pairwise HIT is finished above): each
    opens in the language, is consented to by keyboard, shows its first screen in the language, and passes
    the audit there."""
    language, base, url, page = served_language
    first_screens = {
        "da-demo": lambda w: page.get_by_text(w.gettext("strongly disagree")).first,
        "stb-demo": lambda w: page.locator("#stb-turns .who", has_text=w.gettext("Speaker A")).first,
        "chat-demo": lambda w: page.locator("#progress", has_text=w.gettext("Chatbot %(n)s") % {"n": 1}),
        "arena-demo": lambda w: page.locator(".battle-label", has_text=w.gettext("Battle %(n)s") % {"n": 1}),
        "my-ranking-study": lambda w: page.get_by_text(w.gettext("Put the responses in order, best first.")).first,
    }
    for i, (study, first_screen) in enumerate(first_screens.items()):
        words = enter(page, base, url, study, f"K-O{i}", language)
        first_screen(words).wait_for()
        assert_accessible(page, f"{study} task ({language})")
