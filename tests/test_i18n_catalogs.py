"""The shipped message catalogs are complete: every worker-facing string hitkit marks (templates, scripts'
table, the library's N_ and default_text) is in messages.pot and translated in every shipped language,
with the same placeholders and markup, and every compiled .mo is the compilation of its .po."""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import read_mo, write_mo
from babel.messages.pofile import read_po

from hitkit.i18n.catalogs import SHIPPED_DIR, shipped_languages

REPO = Path(__file__).resolve().parents[1]
LANGUAGES = [lang for lang in shipped_languages() if lang != "en"]
PLACEHOLDER = re.compile(r"%\((\w+)\)[sr]")
TAG = re.compile(r"</?[a-z]+[^>]*>")


def extracted() -> set[str]:
    """What `pybabel extract -F babel.cfg -k N_ -k default_text` finds in the repository, read in-process."""
    with (REPO / "babel.cfg").open(encoding="utf-8") as fp:
        method_map, options_map = parse_mapping_cfg(fp)
    keywords = {"_": None, "gettext": None, "N_": None, "default_text": None}
    found = set()
    for _file, _line, message, _comments, _context in extract_from_dir(
        str(REPO), method_map, options_map, keywords=keywords
    ):
        found.add(message if isinstance(message, str) else message[0])
    return found


def catalog(lang: str):
    with (SHIPPED_DIR / lang / "LC_MESSAGES" / "messages.po").open("rb") as fp:
        return read_po(fp)


@pytest.fixture(scope="module")
def marked() -> set[str]:
    return extracted()


def test_at_least_six_languages_ship_one_right_to_left_and_one_in_a_non_latin_script():
    assert {"de", "fr", "es", "zh", "ar", "hi"} <= set(LANGUAGES)


def test_the_template_holds_every_marked_string_and_nothing_stale(marked):
    with (SHIPPED_DIR / "messages.pot").open("rb") as fp:
        template = {m.id for m in read_po(fp) if m.id}
    assert marked - template == set(), "run pybabel extract (docs: Worker pages in other languages)"
    assert template - marked == set(), "messages.pot holds strings no page uses any more"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_marked_string_is_translated(lang, marked):
    entries = {m.id: m for m in catalog(lang) if m.id}
    missing = sorted(marked - entries.keys())
    empty = sorted(m for m in marked & entries.keys() if not entries[m].string or entries[m].fuzzy)
    assert missing == [] and empty == [], f"{lang}: untranslated: {missing + empty}"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_translations_keep_the_placeholders_and_markup(lang):
    wrong = []
    for m in catalog(lang):
        if not m.id:
            continue
        if not set(PLACEHOLDER.findall(m.string)) <= set(PLACEHOLDER.findall(m.id)):
            wrong.append(f"placeholder: {m.id!r} -> {m.string!r}")  # an unknown name would fail on the page
        if sorted(TAG.findall(m.id)) != sorted(TAG.findall(m.string)):
            wrong.append(f"markup: {m.id!r} -> {m.string!r}")
    assert wrong == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_compiled_catalog_is_the_compilation_of_its_source(lang):
    buffer = io.BytesIO()
    write_mo(buffer, catalog(lang))
    buffer.seek(0)
    with (SHIPPED_DIR / lang / "LC_MESSAGES" / "messages.mo").open("rb") as fp:
        shipped = {m.id: m.string for m in read_mo(fp)}
    fresh = {m.id: m.string for m in read_mo(buffer)}
    assert shipped == fresh, f"recompile {lang}: pybabel compile -d hit_templates/translations"


def test_the_catalogs_are_package_data_git_keeps():
    # hatchling ships hit_templates/ whole minus what .gitignore names (pyproject.toml): a catalog git ignores
    # would be missing from the wheel and from `pip install .`.
    files = [str(p.relative_to(REPO)) for p in SHIPPED_DIR.rglob("messages.*")]
    ignored = subprocess.run(["git", "check-ignore", *files], cwd=REPO, capture_output=True, text=True).stdout
    assert ignored.strip() == ""
    assert len(files) == 1 + 2 * len(LANGUAGES)
