"""The coordinator dashboard: login, CSRF, escaping of worker text, and actions through the provider
and the ledger, on SQLite and PostgreSQL, through Flask's test client."""

from __future__ import annotations

import re
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from sqlalchemy import func, select

from hitkit import dashboard as dash
from hitkit.db.models import (
    Assignment,
    Conversation,
    Event,
    Hit,
    Payment,
    Study,
    Turn,
    Worker,
)
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError, FlowError
from hitkit.providers.simulated import SimulatedProvider
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from hitkit.study.stored import StudyContext, create_study, resolve_secret
from hitkit.worker import admission, flow
from server import auth
from tests.studies import pairwise_study
from tests.test_live_chat_study import bot_server, live_chat_study  # noqa: F401 - fixture

USER, PASSWORD = "coordinator", "correct horse battery"
XSS = '<script>alert("x")</script>'
XSS_IMG = '<img src=x onerror=alert(1)>'


@pytest.fixture
def dashboard_env(monkeypatch):
    monkeypatch.setenv("HITKIT_DASHBOARD_USER", USER)
    monkeypatch.setenv("HITKIT_DASHBOARD_PASSWORD", PASSWORD)
    monkeypatch.delenv("HITKIT_DASHBOARD_PASSWORD_HASH", raising=False)


def make_study(tmp_path, database_url, **changes) -> StudyContext:
    """The example A/B study, created and running, its first HITs posted."""
    config = load_study(pairwise_study(tmp_path, database_url, **changes))
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, None, secret)
        s.get(Study, ctx.study_id).status = "running"
    tick(database_url, config.study, "http://127.0.0.1:9")
    return ctx


def do_hit(database_url: str, ctx: StudyContext, worker: str, feedback: str | None = None) -> int:
    """One worker takes the first open HIT, votes "a" everywhere and submits; the assignment id."""
    with session_scope(database_url) as s:
        hit = s.scalar(select(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "posted").order_by(Hit.index))
        entry = admission.enter(
            s, ctx, hit.id, {"workerId": worker, "assignmentId": f"{worker}-{hit.id}", "hitId": hit.provider_hit_id}
        )
        flow.consent(s, ctx, entry.token)
        for unit, question in flow.missing_answers(ctx, entry.assignment):
            flow.save_answer(s, ctx, entry.token, unit, question, "a")
        assignment, _ = flow.submit(s, ctx, entry.token, feedback=feedback)
        return assignment.id


def empty_db(tmp_path) -> str:
    from hitkit.db.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'empty.db'}"
    upgrade(url)
    return url


def app_for(database_url):
    from server import create_app

    app = create_app(database_url, resolve_secret(database_url))
    app.config["TESTING"] = True
    return app


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]{32})"', html).group(1)


def login(client, password: str = PASSWORD):
    page = client.get("/dashboard/login")
    return client.post(
        "/dashboard/login", data={"username": USER, "password": password, "csrf": csrf_of(page.get_data(as_text=True))}
    )


# Access ----------------------------------------------------------------------------------------
def test_without_credentials_the_dashboard_is_disabled_not_open(tmp_path, monkeypatch):
    for name in ("HITKIT_DASHBOARD_USER", "HITKIT_DASHBOARD_PASSWORD", "HITKIT_DASHBOARD_PASSWORD_HASH"):
        monkeypatch.delenv(name, raising=False)
    client = app_for(empty_db(tmp_path)).test_client()
    page = client.get("/dashboard/")
    assert page.status_code == 404 and "HITKIT_DASHBOARD_USER" in page.get_data(as_text=True)
    assert client.get("/dashboard/api/progress").status_code == 404
    assert client.post("/dashboard/login", data={"username": "", "password": ""}).status_code == 404


def test_half_configured_credentials_are_refused_with_what_to_set():
    with pytest.raises(ConfigError, match="HITKIT_DASHBOARD_PASSWORD"):
        auth.credentials_from_env({"HITKIT_DASHBOARD_USER": "me"})
    with pytest.raises(ConfigError, match="HITKIT_DASHBOARD_USER"):
        auth.credentials_from_env({"HITKIT_DASHBOARD_PASSWORD": "long enough"})
    assert auth.credentials_from_env({}) is None


def test_login_is_required_and_a_wrong_password_is_refused(tmp_path, dashboard_env):
    client = app_for(empty_db(tmp_path)).test_client()
    first = client.get("/dashboard/")
    assert first.status_code == 302 and "/dashboard/login" in first.headers["Location"]
    assert client.get("/dashboard/api/progress", headers={"Accept": "application/json"}).status_code == 401
    assert client.get("/dashboard/events").status_code == 302
    assert login(client, "wrong password").status_code == 401
    assert client.get("/dashboard/").status_code == 302
    ok = login(client)
    assert ok.status_code == 302
    cookie = next(c for c in ok.headers.getlist("Set-Cookie") if c.startswith("hitkit_dashboard="))
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/dashboard" in cookie
    page = client.get("/dashboard/")
    assert page.status_code == 200
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    assert page.headers["Cache-Control"] == "no-store"
    # Logging out ends the session.
    client.post("/dashboard/logout", data={"csrf": csrf_of(page.get_data(as_text=True))})
    assert client.get("/dashboard/").status_code == 302


def test_a_forged_or_foreign_session_cookie_is_not_a_login(tmp_path, dashboard_env):
    client = app_for(empty_db(tmp_path)).test_client()
    client.set_cookie("hitkit_dashboard", "eyJ4Ijp0cnVlfQ.AAAA", path="/dashboard")
    assert client.get("/dashboard/").status_code == 302
    creds = auth.credentials_from_env({"HITKIT_DASHBOARD_USER": USER, "HITKIT_DASHBOARD_PASSWORD": "another password"})
    client.set_cookie(
        "hitkit_dashboard", auth.session_token(resolve_secret(empty_db(tmp_path)), creds), path="/dashboard"
    )
    assert client.get("/dashboard/").status_code == 302  # made for other credentials


def test_a_password_hash_works_and_login_attempts_are_rate_limited(tmp_path, monkeypatch):
    from werkzeug.security import generate_password_hash

    monkeypatch.setenv("HITKIT_DASHBOARD_USER", USER)
    monkeypatch.delenv("HITKIT_DASHBOARD_PASSWORD", raising=False)
    monkeypatch.setenv("HITKIT_DASHBOARD_PASSWORD_HASH", generate_password_hash(PASSWORD))
    client = app_for(empty_db(tmp_path)).test_client()
    assert login(client).status_code == 302
    other = app_for(empty_db(tmp_path)).test_client()
    codes = [login(other, f"guess {i}").status_code for i in range(7)]
    assert codes[:5] == [401] * 5 and codes[-1] == 429


# Worker text is escaped everywhere ------------------------------------------------------------
def test_worker_text_is_escaped_on_every_dashboard_page(tmp_path, database_url, dashboard_env):
    ctx = make_study(tmp_path, database_url)
    assignment = do_hit(database_url, ctx, XSS_IMG, feedback=XSS)
    with session_scope(database_url) as s:
        conv = Conversation(
            study_id=ctx.study_id,
            key="chat:test",
            kind="human_bot",
            meta={"topic_changes": [{"at_turn": 1, "topic": XSS, "by": "worker"}]},
        )
        conv.turns = [Turn(index=0, speaker="worker", text=XSS), Turn(index=1, speaker="bot", text="hello")]
        s.add(conv)
        s.flush()
        conv_id = conv.id
        prompt_conv = s.scalar(select(Conversation.id).where(Conversation.kind == "prompt").order_by(Conversation.id))
    client = app_for(database_url).test_client()
    login(client)
    pages = [
        "/dashboard/",
        f"/dashboard/study/{ctx.name}",
        f"/dashboard/study/{ctx.name}/workers",
        f"/dashboard/study/{ctx.name}/conversations",
        f"/dashboard/study/{ctx.name}/conversations/{conv_id}",
        f"/dashboard/study/{ctx.name}/conversations/{prompt_conv}",
        "/dashboard/events",
        f"/dashboard/study/{ctx.name}/systems/alpha",
        f"/dashboard/study/{ctx.name}/compare?a=alpha&b=beta",
    ]
    for path in pages:
        reply = client.get(path)
        assert reply.status_code == 200, path
        html = reply.get_data(as_text=True)
        assert "<script>alert" not in html and "<img src=x" not in html, path
    workers = client.get(f"/dashboard/study/{ctx.name}/workers").get_data(as_text=True)
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in workers  # the feedback
    assert "&lt;img src=x onerror=alert(1)&gt;" in workers  # the worker id
    chat = client.get(f"/dashboard/study/{ctx.name}/conversations/{conv_id}").get_data(as_text=True)
    assert chat.count("&lt;script&gt;") == 2  # the turn and the topic
    votes = client.get(f"/dashboard/study/{ctx.name}/conversations/{prompt_conv}").get_data(as_text=True)
    assert f"assignment {assignment}" in votes and "&lt;img src=x" in votes


# CSRF --------------------------------------------------------------------------------------------
def test_a_post_without_the_csrf_field_is_refused_and_changes_nothing(tmp_path, database_url, dashboard_env):
    ctx = make_study(tmp_path, database_url)
    do_hit(database_url, ctx, "W-1")
    with session_scope(database_url) as s:
        worker_id = s.scalar(select(Worker.id).where(Worker.external_id == "W-1"))
    client = app_for(database_url).test_client()
    login(client)
    url = f"/dashboard/study/{ctx.name}/workers/{worker_id}/bonus"
    form = {"amount": "1.00", "reason": "great", "key": "k" * 16}
    assert client.post(url, data=form).status_code == 403
    assert client.post(url, data={**form, "csrf": "0" * 32}).status_code == 403
    assert client.post(f"/dashboard/study/{ctx.name}/workers/{worker_id}/block", data={}).status_code == 403
    # Without a login cookie the login form itself needs the field bound to its own cookie.
    fresh = app_for(database_url).test_client()
    assert fresh.post("/dashboard/login", data={"username": USER, "password": PASSWORD}).status_code == 403
    with session_scope(database_url) as s:
        assert s.scalar(select(func.count()).select_from(Payment).where(Payment.kind == "bonus")) == 0
        assert not s.scalar(select(Worker.blocked).where(Worker.id == worker_id))


# Actions through the provider and the ledger ----------------------------------------------------
def test_a_bonus_clicked_twice_is_one_payment_and_one_provider_call(tmp_path, database_url, dashboard_env, monkeypatch):
    calls = []
    original = SimulatedProvider.pay_bonus

    def counting(self, *args, **kwargs):
        calls.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SimulatedProvider, "pay_bonus", counting)
    ctx = make_study(tmp_path, database_url, provider={"kind": "simulated", "fee_rate": "0.25"})
    do_hit(database_url, ctx, "W-1")
    with session_scope(database_url) as s:
        worker_id = s.scalar(select(Worker.id).where(Worker.external_id == "W-1"))
    client = app_for(database_url).test_client()
    login(client)
    page = client.get(f"/dashboard/study/{ctx.name}/workers").get_data(as_text=True)
    key = re.search(r'name="key" value="([^"]+)"', page).group(1)
    form = {"csrf": csrf_of(page), "amount": "0.80", "reason": "clear and careful", "key": key}
    url = f"/dashboard/study/{ctx.name}/workers/{worker_id}/bonus"
    first, second = client.post(url, data=form), client.post(url, data=form)
    assert first.status_code == second.status_code == 302
    assert "already paid" in client.get(second.headers["Location"]).get_data(as_text=True)
    assert len(calls) == 1 and calls[0][0] == "W-1" and calls[0][2] == Decimal("0.80")
    with session_scope(database_url) as s:
        rows = {p.kind: p for p in s.scalars(select(Payment).where(Payment.kind.in_(("bonus", "bonus_fee"))))}
        assert set(rows) == {"bonus", "bonus_fee"}
        assert rows["bonus"].amount == Decimal("0.80") and rows["bonus_fee"].amount == Decimal("0.20")
        assert rows["bonus"].status == rows["bonus_fee"].status == "paid"
        assert rows["bonus"].provider_ref
        events = s.scalars(select(Event).where(Event.kind == "bonus_paid")).all()
        assert len(events) == 1 and events[0].actor == "dashboard"
    # A fresh form is a new bonus; an amount over the budget is refused before the provider hears of it.
    reply = client.post(
        url, data={**form, "key": "another-key-1", "amount": "999.00"}, headers={"Accept": "application/json"}
    )
    assert reply.status_code == 400 and "budget" in reply.get_json()["message"]
    assert len(calls) == 1


def test_approve_reject_and_block_go_through_the_provider_and_are_logged(
    tmp_path, database_url, dashboard_env, monkeypatch
):
    decided = []
    monkeypatch.setattr(SimulatedProvider, "approve", lambda self, pid, feedback="": decided.append(("approve", pid)))
    monkeypatch.setattr(SimulatedProvider, "reject", lambda self, pid, reason: decided.append(("reject", pid)))
    # Approval waits an hour, so submitted work stays for the coordinator to decide.
    ctx = make_study(tmp_path, database_url, schedule={"approve_after_s": 3600})
    good, bad = do_hit(database_url, ctx, "W-good"), do_hit(database_url, ctx, "W-bad")
    client = app_for(database_url).test_client()
    login(client)
    csrf = csrf_of(client.get(f"/dashboard/study/{ctx.name}/workers").get_data(as_text=True))
    base = f"/dashboard/study/{ctx.name}"
    assert client.post(f"{base}/assignments/{good}/approve", data={"csrf": csrf}).status_code == 302
    assert client.post(f"{base}/assignments/{good}/approve", data={"csrf": csrf}).status_code == 302  # no-op
    assert (
        client.post(f"{base}/assignments/{bad}/reject", data={"csrf": csrf, "reason": "voted a everywhere"}).status_code
        == 302
    )
    with session_scope(database_url) as s:
        bad_worker = s.scalar(select(Assignment.worker_id).where(Assignment.id == bad))
    assert client.post(f"{base}/workers/{bad_worker}/block", data={"csrf": csrf, "reason": "spam"}).status_code == 302
    assert decided == [("approve", "W-good-1"), ("reject", "W-bad-1")]
    with session_scope(database_url) as s:
        assert s.get(Assignment, good).status == "approved" and s.get(Assignment, bad).status == "rejected"
        paid = {p.kind: p.status for p in s.scalars(select(Payment).where(Payment.assignment_id == good))}
        assert paid == {"reward": "paid", "fee": "paid"}
        assert s.scalar(select(func.count()).select_from(Payment).where(Payment.assignment_id == bad)) == 0
        kinds = [e.kind for e in s.scalars(select(Event).where(Event.actor == "dashboard").order_by(Event.id))]
        assert kinds == ["assignment_approved", "assignment_rejected", "worker_blocked"]
        assert s.get(Worker, bad_worker).blocked
        # hitkit itself now refuses the blocked worker.
        hit = s.scalar(select(Hit).where(Hit.status == "posted").order_by(Hit.index.desc()))
        with pytest.raises(FlowError, match="not able to take part"):
            admission.enter(
                s, ctx, hit.id, {"workerId": "W-bad", "assignmentId": "again", "hitId": hit.provider_hit_id}
            )
    # The scheduler does not pay the approved reward a second time.
    tick(database_url, ctx.name, "http://127.0.0.1:9")
    with session_scope(database_url) as s:
        assert s.scalar(select(func.count()).select_from(Payment).where(Payment.assignment_id == good)) == 2


# Progress ------------------------------------------------------------------------------------------
def test_progress_counts_per_system_and_qc_come_from_the_rows(tmp_path, database_url, dashboard_env):
    ctx = make_study(tmp_path, database_url)
    client = app_for(database_url).test_client()
    login(client)
    before = client.get(f"/dashboard/api/progress?study={ctx.name}").get_json()["studies"][0]
    assert before["answers_done"] == 0 and before["answers_needed"] == 270 and before["hits_posted"] == 4
    for w in ("W-1", "W-2", "W-3"):
        do_hit(database_url, ctx, w)
    after = client.get(f"/dashboard/api/progress?study={ctx.name}").get_json()["studies"][0]
    assert after["submitted"] == 3 and after["workers"] == 3
    assert after["answers_done"] > 0
    systems = {r["name"]: r for r in after["systems"]}
    assert set(systems) == {"alpha", "beta", "gamma"}
    # Each of the HIT's ten comparisons involves two of the three systems.
    assert sum(r["answers"] for r in systems.values()) == 2 * after["answers_done"]
    assert after["qc"]["workers"] == 3 and after["work_time_median_s"] is not None
    page = client.get(f"/dashboard/study/{ctx.name}").get_data(as_text=True)
    assert 'data-system="alpha"' in page and 'data-live="submitted"' in page


# Live chat: chats, ratings and the QC test as the dashboard shows them -------------------------------
def test_a_live_chat_study_shows_its_chats_ratings_qc_and_side_by_side(
    tmp_path,
    one_database_url,
    dashboard_env,
    bot_server,  # noqa: F811 - the fixture imported above
):
    database_url = one_database_url  # one store: what this test checks is not storage
    from tests.studies import launch

    study_file = live_chat_study(tmp_path, database_url, bot_server, hits=2)
    data = yaml.safe_load(study_file.read_text())
    data["simulated"] = {**data["simulated"], "workers": [{"profile": "diligent", "count": 2}], "concurrency": 2}
    study_file.write_text(yaml.safe_dump(data, sort_keys=False))
    launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=240, analyse=False)
    client = app_for(database_url).test_client()
    login(client)
    progress = client.get("/dashboard/api/progress?study=chat-demo").get_json()["studies"][0]
    assert progress["answers_done"] == progress["answers_needed"] and progress["approved"] == 2
    assert progress["qc"]["workers"] == 2 and progress["qc"]["method"].startswith("QC bot")
    systems = {r["name"]: r for r in progress["systems"]}
    assert systems["qc"]["is_control"] and systems["qc"]["conversations"] == 2
    with session_scope(database_url) as s:
        chat = s.scalar(select(Conversation).where(Conversation.kind == "human_bot").order_by(Conversation.id))
        chat_id, system = chat.id, chat.meta["system"]
    page = client.get(f"/dashboard/study/chat-demo/conversations/{chat_id}").get_data(as_text=True)
    assert "Ratings" in page and "interesting" in page and "topic_sentiment" in page
    profile = client.get(f"/dashboard/study/chat-demo/systems/{system}").get_data(as_text=True)
    assert "Mean 0–100 slider ratings" in profile and "distinct-1" in profile
    compare = client.get("/dashboard/study/chat-demo/compare?a=anna&b=qc").get_data(as_text=True)
    assert compare.count('class="card compare-row"') == 2  # each worker's HIT holds both
    assert client.get(f"/dashboard/study/chat-demo/conversations?system={system}").status_code == 200


def test_answers_read_in_system_names_and_automatic_metrics():
    from hitkit.protocols import PROTOCOLS

    entry = {"unit_id": 7, "layout": {"swapped": {"7": True}}, "answers": {"vote": "a"}}
    pairwise, spot_the_bot = (PROTOCOLS[name].module("views") for name in ("pairwise", "spot_the_bot"))
    assert pairwise.readable_answers({"systems": ["x", "y"]}, entry) == {"vote": "y"}
    entry = {"unit_id": 1, "layout": {}, "answers": {"label_0": "bot", "label_1": "human", "fluency": "1"}}
    assert spot_the_bot.readable_answers({"systems": ["x", "human"]}, entry) == {
        "label_0": "x → bot",
        "label_1": "human → human",
        "fluency": "human",
    }
    assert dash.unit_systems({"systems": ["a", "a"]}) == ("a",) and dash.unit_systems({"system": "q"}) == ("q",)


def test_profile_distinct_n_divides_by_tokens_as_li_et_al_and_the_prescreen():
    # 4 tokens "a b a" | "c": 3 distinct unigrams / 4 tokens; bigrams (a b) (b a): 2 distinct / 4
    # tokens (Li et al. 2016 and ChatEval), not / 2 bigrams (which would give 1.0).
    metrics = dash.automatic_metrics(["a b a", "c"])
    assert metrics == {"turns": 2, "mean_words": 2.0, "distinct_1": 0.75, "distinct_2": 0.5}
    from hitkit.prescreen.chateval import system_metrics

    texts = ["Hello there, friend!", "hello there again", "Fine."]
    chateval = system_metrics(["p"] * 3, texts, [None] * 3)
    profile = dash.automatic_metrics(texts)
    assert profile["distinct_2"] == round(chateval["distinct_2"], 3)
    assert dash.automatic_metrics(["", "!"])["distinct_1"] is None


def test_every_system_link_of_a_spot_the_bot_study_opens_and_human_material_has_no_link(tmp_path, dashboard_env):
    # The frozen golden run: bot-bot and human-human conversations, labelled by the simulated crowd.

    db = tmp_path / "hitkit.db"
    shutil.copy(Path(__file__).parent / "data" / "golden" / "spot_the_bot" / "hitkit.db", db)
    # Frozen at the revision it was made with: brought to the current schema first, as `hitkit db upgrade` does.
    from hitkit.db.migrate import upgrade

    upgrade(f"sqlite:///{db}")
    client = app_for(f"sqlite:///{db}").test_client()
    login(client)
    page = client.get("/dashboard/study/golden-spot-the-bot").get_data(as_text=True)
    assert '<tr data-system="human">' in page and "/systems/human" not in page
    links = set(re.findall(r'href="(/dashboard/study/golden-spot-the-bot/systems/[^"]+)"', page))
    assert links and all(client.get(link).status_code == 200 for link in links)


def test_the_study_page_shows_each_comparisons_interval_and_the_stopping_rules_state(
    tmp_path, database_url, dashboard_env, monkeypatch
):
    from hitkit.analysis.sequential import RuleState
    from hitkit.running import stopping

    ctx = make_study(tmp_path, database_url, stop={"decision": "pairs", "alpha": 0.1})
    for n in range(3):
        do_hit(database_url, ctx, f"W-stop-{n}")
    client = app_for(database_url).test_client()
    login(client)
    html = client.get("/dashboard/study/ab-demo").get_data(as_text=True)
    assert "Stopping rule" in html and 'data-stop-fired="no"' in html
    for pair in ("alpha~beta", "alpha~gamma", "beta~gamma"):
        assert f'data-pair="{pair}"' in html
    live = client.get("/dashboard/api/progress?study=ab-demo", headers={"Accept": "application/json"}).get_json()
    rule = live["studies"][0]["stopping"]
    assert rule["decision"] == "pairs" and not rule["fired"] and rule["counted_hits"] == 3
    # n counts workers per pair (one observation each): each of the three HITs' workers once for each of the
    # two pairs its ten votes fall on.
    assert sum(r["n"] for r in rule["now"]) == 3 * 2

    decided = RuleState("pairs", True, "differ: alpha > gamma", [])
    monkeypatch.setattr(stopping, "rule_state", lambda session, c: decided)
    tick(database_url, "ab-demo", "http://127.0.0.1:9")
    html = client.get("/dashboard/study/ab-demo").get_data(as_text=True)
    assert (
        'data-stop-fired="yes"' in html
        and "Fired after 3 of " in html
        and " assignments (" in html
        and "differ: alpha &gt; gamma" in html
    )
