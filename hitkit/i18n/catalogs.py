"""The message catalogs: shipped with hitkit (``hit_templates/translations/LANG/LC_MESSAGES/messages.po``
and its compiled ``.mo``), and a coordinator's own, next to the study file
(``translations/LANG/LC_MESSAGES/messages.po``), compiled when the study is loaded. A study's own
catalog adds languages and overrides single sentences of a shipped one.

Languages are BCP 47 tags (``de``, ``pt-BR``, ``zh-Hans``); a catalog is looked up for the full tag,
then for its language alone (``zh-Hans`` finds ``zh``). English needs no catalog: the message ids are English.
"""

from __future__ import annotations

import datetime as dt
import functools
import io
from decimal import Decimal
from pathlib import Path

from babel import Locale, UnknownLocaleError
from babel.dates import format_timedelta
from babel.messages.mofile import write_mo
from babel.messages.pofile import PoFileError, read_po
from babel.numbers import format_decimal
from babel.support import NullTranslations, Translations

import hit_templates
from hitkit.errors import ConfigError
from hitkit.i18n import Message, localise

DOMAIN = "messages"
SHIPPED_DIR = Path(hit_templates.__file__).parent / "translations"
"""The catalogs hitkit ships: one folder per language, gettext's layout."""
STUDY_DIR = "translations"
"""The folder next to a study file that holds the coordinator's own catalogs, in the same layout."""
DEFAULT_LANGUAGE = "en"


def parse_tag(tag: str) -> Locale:
    """The Babel locale of a BCP 47 tag; ValueError saying what is wrong otherwise."""
    try:
        return Locale.parse(tag.replace("_", "-"), sep="-")
    except (UnknownLocaleError, ValueError, TypeError):
        raise ValueError(
            f"ui_language {tag!r} is not a language tag Babel knows; write a BCP 47 tag such as "
            f"en, de, fr, es, zh, ar, hi or pt-BR"
        ) from None


def shipped_languages() -> tuple[str, ...]:
    """The languages hitkit ships a catalog for, English first."""
    found = sorted(p.name for p in SHIPPED_DIR.iterdir() if (p / "LC_MESSAGES" / f"{DOMAIN}.mo").is_file())
    return tuple(["en"] + [name for name in found if name != "en"])


def _candidates(locale: Locale) -> list[str]:
    """Catalog folder names for ``locale``, the most specific first (zh_Hans_CN, zh_Hans, zh)."""
    names = [str(locale)]
    if locale.script and locale.territory:
        names.append(f"{locale.language}_{locale.script}")
    names.append(locale.language)
    return list(dict.fromkeys(names))


def study_catalog(language: str, study_dir: Path) -> Path | None:
    """The coordinator's own catalog for ``language`` next to the study file, if there is one."""
    for name in _candidates(parse_tag(language)):
        for folder in (name, name.replace("_", "-")):
            path = study_dir / STUDY_DIR / folder / "LC_MESSAGES" / f"{DOMAIN}.po"
            if path.is_file():
                return path
    return None


def _shipped(locale: Locale) -> Translations | None:
    for name in _candidates(locale):
        path = SHIPPED_DIR / name / "LC_MESSAGES" / f"{DOMAIN}.mo"
        if path.is_file():
            with path.open("rb") as fp:
                return Translations(fp, domain=DOMAIN)
    return None


def compile_po(path: Path) -> Translations:
    """A ``.po`` file compiled in memory; ConfigError naming the file and line if it does not parse."""
    try:
        with path.open("rb") as fp:
            catalog = read_po(fp, abort_invalid=True)
    except (PoFileError, UnicodeDecodeError, OSError) as exc:
        raise ConfigError(f"{path}: not a readable gettext catalog ({exc}); fix it or remove it") from None
    buffer = io.BytesIO()
    write_mo(buffer, catalog)
    buffer.seek(0)
    return Translations(buffer, domain=DOMAIN)


def check_language(language: str, study_dir: Path) -> None:
    """ConfigError unless worker pages can be shown in ``language``: English, a shipped catalog, or the study's own."""
    locale = parse_tag(language)
    own = study_catalog(language, study_dir)
    if own is not None:
        compile_po(own)  # a catalog that does not parse is refused now, naming the file, not on the first page
    if locale.language == "en" or _shipped(locale) is not None or own is not None:
        return
    raise ConfigError(
        f"ui_language is {language!r}, but hitkit ships no catalog for it (it ships "
        f"{', '.join(shipped_languages())}) and there is no {STUDY_DIR}/{locale}/LC_MESSAGES/{DOMAIN}.po "
        f"next to the study file; write one (docs: Worker pages in other languages) or choose a shipped language"
    )


class Words:
    """One study's worker-facing language: its catalog (shipped, then the study's own on top), its text
    direction and its number and duration formats. Satisfies :class:`hitkit.i18n.Translator`."""

    def __init__(self, language: str, study_dir: Path | None = None):
        self.language = language
        self.locale = parse_tag(language)
        self.direction = self.locale.text_direction  # "ltr" or "rtl"
        base = _shipped(self.locale) if self.locale.language != "en" else None
        own = study_catalog(language, study_dir) if study_dir is not None else None
        translations: NullTranslations | Translations = base if base is not None else NullTranslations()
        if own is not None:
            mine = compile_po(own)
            if isinstance(translations, Translations):
                translations.merge(mine)  # the study's sentences win
            else:
                translations = mine
        self.translations = translations

    def gettext(self, message: str) -> str:
        """``message`` (an English message id) in this language; the English where the catalog has none."""
        return self.translations.gettext(message)

    def number(self, value: float | int | Decimal) -> str:
        return format_decimal(value, locale=self.locale)

    def duration(self, value: dt.timedelta) -> str:
        return format_timedelta(value, locale=self.locale, threshold=1.0)

    def text(self, message: Message | str) -> str:
        """One marked sentence (or plain text, unchanged) in this language."""
        return localise(message, self)


@functools.lru_cache(maxsize=64)
def words_for(language: str, study_dir: Path | None = None) -> Words:
    """The :class:`Words` of a language and study folder, made once per process (a study's language is fixed
    once it is launched; its own catalog is read when the study is first loaded)."""
    return Words(language, study_dir)


def english() -> Words:
    """The words of pages no study's language applies to (a refusal before the study is known)."""
    return words_for(DEFAULT_LANGUAGE)
