"""Worker pages in the study's language: marked sentences translated at the edge, numbers and durations
formatted for the language, the study's own text left as written, a coordinator's catalog next to the
study file adding or overriding sentences, and ui_language fixed once a study is launched."""

from __future__ import annotations

import datetime as dt
import re

import pytest
import requests

from hitkit.db.models import Study
from hitkit.errors import ConfigError, HitkitError
from hitkit.i18n import N_, localise, own
from hitkit.i18n.catalogs import Words, check_language, shipped_languages
from hitkit.protocols import PROTOCOLS
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA
from hitkit.running.resume import apply_resume_changes
from hitkit.study.config import load_study
from hitkit.study.scaffold import scaffold, tasks
from tests.studies import pairwise_study, served

OVERRIDE = """\
msgid ""
msgstr ""
"Content-Type: text/plain; charset=utf-8\\n"

msgid "Send to both"
msgstr "An beide schicken"

msgid "Tie"
msgstr "Gleichstand"
"""


def test_a_marked_sentence_is_english_in_the_library_and_translated_at_the_edge():
    message = N_(
        "the time limit of this HIT (%(limit)s) has passed; your place has been given up and the HIT "
        "can no longer be answered or submitted",
        limit=dt.timedelta(minutes=30),
    )
    assert message.startswith("the time limit of this HIT (30 minutes) has passed")
    assert Words("de").text(message).startswith("die Zeitgrenze dieses HITs (30 Minuten) ist abgelaufen")
    assert "٣٠" not in Words("ar").text(message) and "30 دقيقة" in Words("ar").text(message)


def test_numbers_are_written_for_the_language():
    counted = N_("the comment is %(length)s characters; the limit is %(limit)s", length=5000, limit=2000)
    assert str(counted) == "the comment is 5000 characters; the limit is 2000"  # logs and the library: as is
    assert Words("en").text(counted) == "the comment is 5,000 characters; the limit is 2,000"
    assert Words("de").text(counted) == "der Kommentar hat 5.000 Zeichen; erlaubt sind höchstens 2.000"
    assert Words("fr").text(counted) == "le commentaire fait 5\u202f000 caractères ; la limite est de 2\u202f000"


def test_a_page_state_is_translated_through_and_the_studys_own_text_stays_as_written():
    statement = DEFAULT_CRITERIA[1].statement
    state = {
        "units": [
            {
                "label": N_("Chatbot %(n)s", n=2),
                "topic": "my dog",
                "criteria": [
                    {"statement": own(str(statement))},  # hitkit's default, back from the database as a plain str
                    {"statement": own("The bot was kind.")},  # the study's own wording
                ],
            },
        ]
    }
    shown = localise(state, Words("es"))
    assert shown["units"][0]["label"] == "Chatbot 2"
    assert shown["units"][0]["topic"] == "my dog"
    assert shown["units"][0]["criteria"][0]["statement"] == "La conversación con el chatbot fue interesante."
    assert shown["units"][0]["criteria"][1]["statement"] == "The bot was kind."
    assert localise(state, Words("zh"))["units"][0]["label"] == "聊天机器人 2"


def test_a_study_catalog_overrides_shipped_sentences_and_adds_a_language(tmp_path):
    folder = tmp_path / "translations" / "de" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    (folder / "messages.po").write_text(OVERRIDE, encoding="utf-8")
    mine = Words("de", tmp_path)
    assert mine.gettext("Send to both") == "An beide schicken"  # the study's sentence wins
    assert mine.gettext("Both are bad") == "Beide sind schlecht"  # the rest is hitkit's
    (tmp_path / "translations" / "pt-BR" / "LC_MESSAGES").mkdir(parents=True)
    (tmp_path / "translations" / "pt-BR" / "LC_MESSAGES" / "messages.po").write_text(
        OVERRIDE.replace("An beide schicken", "Enviar para os dois"), encoding="utf-8"
    )
    check_language("pt-BR", tmp_path)
    assert Words("pt-BR", tmp_path).gettext("Send to both") == "Enviar para os dois"
    assert Words("pt-BR", tmp_path).gettext("Submit") == "Submit"  # untranslated: the English, never empty


def test_a_language_without_a_catalog_or_a_broken_catalog_is_refused_naming_the_file(tmp_path):
    study = pairwise_study(tmp_path, "sqlite:///unused.db", ui_language="ja")
    with pytest.raises(ConfigError, match=r"study.yaml: ui_language is 'ja'.*translations/ja/LC_MESSAGES/messages.po"):
        load_study(study)
    with pytest.raises(ConfigError, match="not a language tag"):
        load_study(pairwise_study(tmp_path, "sqlite:///unused.db", ui_language="no such tag"))
    broken = tmp_path / "translations" / "de" / "LC_MESSAGES"
    broken.mkdir(parents=True)
    (broken / "messages.po").write_text('msgid "Tie"\nthis is not gettext\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"messages.po: not a readable gettext catalog"):
        Words("de", tmp_path)
    with pytest.raises(ConfigError, match=r"study.yaml: .*messages.po: not a readable gettext catalog"):
        load_study(pairwise_study(tmp_path, "sqlite:///unused.db", ui_language="de"))  # at launch, not on a page


def test_ui_language_cannot_change_once_the_study_is_launched(tmp_path):
    # Refused, not handled: workers who started in one language would otherwise finish in another, and the
    # study's record would not say which words each worker read.
    config = load_study(pairwise_study(tmp_path, "sqlite:///unused.db", ui_language="de"))
    stored = Study(
        name=config.study, config=load_study(pairwise_study(tmp_path, "sqlite:///unused.db")).model_dump(mode="json")
    )
    with pytest.raises(HitkitError, match="ui_language changed since the study was launched"):
        apply_resume_changes(stored, config)


@pytest.fixture
def german(tmp_path, one_database_url):
    study = pairwise_study(
        tmp_path, one_database_url, ui_language="de", hit={"instructions": {"de": "Bitte lesen Sie genau.", "fr": "x"}}
    )
    for url, _config, _secret in served(study, one_database_url):
        yield url


def test_a_german_study_serves_german_pages_states_and_errors(german):
    http = requests.Session()
    page = http.get(f"{german}/s/ab-demo/hit/1", params={"workerId": "W1", "assignmentId": "A1", "hitId": "h1"})
    assert '<html lang="de" dir="ltr">' in page.text
    assert "Ich stimme zu — Aufgabe beginnen" in page.text and "Bitte lesen Sie genau." in page.text
    task = page.url.split("?")[0]
    task_page = http.post(task + "consent")
    assert "Welche Antwort ist besser?" in task_page.text  # the study kept hitkit's default question
    assert re.search(r'"saving": "wird gespeichert …"', task_page.text)  # the scripts' table
    refused = http.post(task + "submit", headers={"Accept": "application/json"})
    assert refused.status_code == 400
    assert refused.json()["error"].endswith(
        "Frage(n) sind noch nicht beantwortet; beantworten Sie alle und senden Sie dann ab"
    )
    assert http.get(f"{german}/a/ab-demo/forged/state").json()["error"] == (
        "dieser Link ist ungültig; bitte kehren Sie über die Crowd-Website zur Aufgabe zurück"
    )


@pytest.mark.parametrize("language", [lang for lang in shipped_languages() if lang != "en"])
def test_init_writes_a_starter_whose_instructions_are_in_the_language(tmp_path, language):
    for task in tasks():
        starter = PROTOCOLS[task].module("starter")
        assert all(text in starter.STUDY_YAML for text in starter.WORKER_TEXT), task  # the list matches the file
        scaffold(tmp_path / task, task, language)
        config = load_study(tmp_path / task / "study.yaml")
        english = load_study_text(starter.STUDY_YAML, tmp_path / task)
        assert config.ui_language == language
        assert config.hit.title == Words(language).gettext(english.hit.title) != english.hit.title, task
        assert config.hit.description != english.hit.description, task
    with pytest.raises(ConfigError, match="ui_language is 'ja'"):
        scaffold(tmp_path / "ja", "pairwise", "ja")


def load_study_text(text: str, folder):
    path = folder / "english.yaml"
    path.write_text(text, encoding="utf-8")
    return load_study(path)
