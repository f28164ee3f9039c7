"""Studies that stop when their decision is made: the stop rule's statistics, and whole adaptive studies
with the simulated crowd through real HTTP, asserted on the database, the export and the report."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from sqlalchemy import func, select

from hitkit.analysis.sequential import Comparison, intervals, radius, rho_for, settle
from hitkit.db.models import Assignment, Event, Hit, HitUnit, Payment, Study, Unit
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError
from hitkit.report.build import report
from hitkit.running.status import study_status
from hitkit.study.loading import parse_study
from tests.studies import launch, pairwise_study
from tests.test_live_chat_study import bot_server, live_chat_study  # noqa: F401 - fixture

WIDE = {"alpha": 0.95, "beta": 0.5, "gamma": 0.05}
EQUAL = {"alpha": 0.5, "beta": 0.5, "gamma": 0.5}


# The statistics --------------------------------------------------------------------------------------
def test_looking_after_every_vote_keeps_false_claims_below_alpha():
    # Two equal systems, 2,000 votes each study, a look after every vote: the share of studies whose
    # interval ever excludes ½ stays below α (a fixed-sample test looked at this often would pass 30 %).
    rng = np.random.default_rng(3)
    studies, votes, alpha = 400, 2000, 0.05
    scores = rng.integers(0, 2, size=(studies, votes)).astype(float)
    t = np.arange(1, votes + 1)
    means = scores.cumsum(axis=1) / t
    r = radius(t, 0.25, alpha, rho_for(votes, 0.25, alpha))
    ever = (np.abs(means - 0.5) > r).any(axis=1)
    assert ever.mean() <= alpha
    naive = (np.abs(means - 0.5) > 1.96 * 0.5 / np.sqrt(t))[:, 20:].any(axis=1)
    assert naive.mean() > 3 * alpha


def test_an_interval_narrows_with_data_and_names_the_better_system():
    found = intervals([Comparison("a", "b", n, 0.6, 0.25, 2000, null=0.5, exact=True) for n in (10, 200, 2000)], 0.05)
    widths = [i.high - i.low for i in found]
    assert widths == sorted(widths, reverse=True)
    assert [i.winner for i in found] == [None, None, "a"]


def test_a_pair_too_close_to_settle_within_the_planned_size_is_futile_and_a_wide_one_is_not():
    close, wide = intervals(
        [
            Comparison("a", "b", 1500, 0.505, 0.25, 2000, null=0.5),
            Comparison("a", "c", 100, 0.56, 0.25, 2000, null=0.5),
        ],
        0.05,
    )
    assert close.futile and close.settled
    assert not wide.futile and not wide.settled


def test_best_fires_only_when_one_system_beats_every_other():
    def state(ab, ac, bc):
        return settle(
            intervals(
                [
                    Comparison("a", "b", 900, ab, 0.25, 1000, 0.5),
                    Comparison("a", "c", 900, ac, 0.25, 1000, 0.5),
                    Comparison("b", "c", 900, bc, 0.25, 1000, 0.5),
                ],
                0.05,
            ),
            "best",
            ["a", "b", "c"],
        )

    fired = state(0.7, 0.8, 0.6)
    assert fired.fired and fired.leader == "a" and "a is best" in fired.outcome
    tied_top = state(0.5, 0.8, 0.8)
    assert not tied_top.fired and set(tied_top.open) == {("a", "b")}
    assert tied_top.weights[("a", "b")] > 0


# The study file -----------------------------------------------------------------------------------
def _study(**changes):
    base = {
        "study": "s",
        "task": "pairwise",
        "budget": "10",
        "systems": [{"name": "a"}, {"name": "b"}],
        "pairwise": {"responses": "r.jsonl"},
    }
    return parse_study({**base, **changes})


def test_an_adaptive_design_without_a_stop_rule_is_refused_with_the_reason():
    with pytest.raises(ConfigError, match="design: adaptive needs a 'stop:' section"):
        _study(design="adaptive")


def test_a_stop_rule_on_a_pair_must_name_two_systems_of_the_study():
    with pytest.raises(ConfigError, match="stop.systems names systems that are not in 'systems': zeta"):
        _study(stop={"decision": "pair", "systems": ["a", "zeta"]})
    with pytest.raises(ConfigError, match="stop.systems names the two systems of decision: pair"):
        _study(stop={"decision": "pair"})
    assert _study(stop={"decision": "pair", "systems": ["a", "b"]}).stop.systems == ["a", "b"]


# Whole studies ------------------------------------------------------------------------------------
def _adaptive_pairwise(tmp_path, database_url, quality, prompts_per_hit: int = 5):
    """The example pairwise study, adaptive, stopping when its best system is known. The rule counts a
    worker once per pair, so the crowd is large enough for each pair's HITs to reach different workers
    (40 workers, two HITs each at most)."""
    return pairwise_study(
        tmp_path,
        database_url,
        design="adaptive",
        stop={"decision": "best"},
        simulated={
            "quality": quality,
            "workers": [{"profile": "diligent", "count": 38}, {"profile": "spammer", "count": 2}],
        },
        pairwise={"prompts_per_hit": prompts_per_hit},
        schedule={"wave_size": 1, "max_concurrent": 2, "per_worker_cap": 2},
    )


def test_an_adaptive_pairwise_study_stops_early_when_one_system_is_far_better(tmp_path, one_database_url):
    study_file = _adaptive_pairwise(tmp_path, one_database_url, WIDE)
    launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=240)
    out = tmp_path / "runs" / "ab-demo"
    with session_scope(one_database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        fired = s.scalars(select(Event).where(Event.kind == "stop_rule_fired")).all()
        assert len(fired) == 1 and fired[0].data["outcome"].startswith("alpha is best")
        statuses = dict(s.execute(select(Hit.status, func.count()).group_by(Hit.status)).all())
        assert statuses.get("withdrawn", 0) > 0 and statuses.get("pending", 0) == 0
        # Withdrawn HITs were never offered: no one took them, so nothing is paid for them.
        assert s.scalar(select(func.count()).select_from(Assignment).join(Hit).where(Hit.status == "withdrawn")) == 0
        assert s.scalar(select(func.count()).select_from(Payment)) > 0
    info = json.loads((out / "export" / "study.json").read_text())
    rule = info["stopping"]
    assert rule["fired"] and rule["fired_after_hits"] < rule["fixed_design"]["assignments"]
    assert float(rule["committed"]) < float(rule["fixed_design"]["cost"])
    shown = study_status(one_database_url, "ab-demo")
    assert shown["stopped_by_rule"]["outcome"].startswith("alpha is best") and shown["hits"]["withdrawn"] > 0
    files = report(out)
    assert "## Stopping rule" in files.markdown.read_text()
    assert (
        f"The rule fired after {rule['fired_after_hits']} of the fixed design's "
        f"{rule['fixed_design']['assignments']} assignments (alpha is best"
    ) in files.methods


def test_an_adaptive_pairwise_study_of_equal_systems_runs_its_whole_design(tmp_path, one_database_url):
    # Ten prompts a HIT: the whole design in half as many HITs (each still a look for the rule).
    study_file = _adaptive_pairwise(tmp_path, one_database_url, EQUAL, prompts_per_hit=10)
    launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=240)
    with session_scope(one_database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        assert s.scalar(select(func.count()).select_from(Event).where(Event.kind == "stop_rule_fired")) == 0
        assert set(s.scalars(select(Hit.status))) == {"completed"}
    rule = json.loads((tmp_path / "runs" / "ab-demo" / "export" / "study.json").read_text())["stopping"]
    assert not rule["fired"] and rule["now"]


def adaptive(path, data: dict, quality: dict, min_hits: int = 1, **schedule):
    """Write ``data`` to ``path`` as an adaptive study that stops when its best system is known, with these
    qualities, 30 diligent workers, one HIT posted at a time (two open at most) and a 0.1 s scheduler tick
    (posting one HIT a tick, the tick sets the pace of these studies)."""
    data.update(design="adaptive", stop={"decision": "best", "min_hits": min_hits})
    data["simulated"].update(quality=quality, workers=[{"profile": "diligent", "count": 30}])
    data["schedule"].update(wave_size=1, max_concurrent=2, **{"interval_s": 0.1, **schedule})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def assert_stopped_early_only_if(stops: bool, database_url: str, best: str) -> None:
    """The study completed; when ``stops``, its rule fired once naming ``best`` and some HITs were never
    posted; else it never fired and every HIT was done."""
    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        fired = s.scalars(select(Event).where(Event.kind == "stop_rule_fired")).all()
        statuses = set(s.scalars(select(Hit.status)))
    if stops:
        assert len(fired) == 1 and fired[0].data["outcome"].startswith(f"{best} is best")
        assert "withdrawn" in statuses
    else:
        assert fired == [] and statuses == {"completed"}


def _adaptive_stb(tmp_path, database_url, quality, per_pair: int):
    """An adaptive Spot The Bot study of ``per_pair`` conversations for each pair of bots (self-chat
    included). The comparisons' variance is clustered by conversation: with six a pair the wide case's
    rule fired after 17 to 26 of its 36 assignments, and in one loaded CI run not at all; with ten a
    pair it fired after 14 to 16 of 54 with the earlier asymptotic sequences. The bounded per-conversation
    sequences need more conversations before they can settle (in one loaded run ten a pair never fired), and
    the per-worker rule takes one observation per annotator, each on conversations no earlier one used: with
    fourteen a pair it fired at 10 observations a pair when it fired, and in one loaded CI run not at all;
    with sixteen in 1 of 3 local runs; with thirty-two in 3 of 3, after 15 to 36 HITs. The sign-flip test
    that replaced it (every annotation a worker gives on the conversations they reached first) fired, in one
    local run each, after 34 counted assignments with thirty-two a pair (84 HITs) and after 51 with sixteen
    (42 HITs). The equal case has four, its whole design being run."""
    from tests.test_spot_the_bot_study import stb_study, write_bot_bot, write_human_human

    humans = (
        28
        if per_pair > 24
        else 21
        if per_pair > 16
        else 14
        if per_pair > 14
        else 12
        if per_pair > 10
        else 9
        if per_pair > 6
        else 6
        if per_pair > 4
        else 4
    )
    study_file = stb_study(tmp_path, database_url, human_count=humans)
    write_bot_bot(tmp_path / "bot_bot.jsonl", per_pair=per_pair)
    write_human_human(tmp_path / "human.jsonl", count=humans + 2)
    return adaptive(study_file, yaml.safe_load(study_file.read_text()), quality, per_worker_cap=4)


@pytest.mark.parametrize(
    "quality, stops, per_pair",
    [({"alpha": 0.95, "beta": 0.05, "gamma": 0.05}, True, 32), ({"alpha": 0.5, "beta": 0.5, "gamma": 0.5}, False, 4)],
    ids=["wide", "equal"],
)
def test_an_adaptive_spot_the_bot_study_stops_early_only_when_one_bot_is_far_better(
    tmp_path, one_database_url, quality, stops, per_pair
):
    launch(
        _adaptive_stb(tmp_path, one_database_url, quality, per_pair),
        yes=True,
        show_progress=False,
        echo=lambda _m: None,
        timeout_s=300,
    )
    assert_stopped_early_only_if(stops, one_database_url, "alpha")
    with session_scope(one_database_url) as s:
        # The adaptive order keeps the packing's constraint: no worker saw two segments of one conversation.
        seen = s.execute(
            select(Assignment.worker_id, Unit.conversation_id)
            .join(Hit, Hit.id == Assignment.hit_id)
            .join(HitUnit, HitUnit.hit_id == Hit.id)
            .join(Unit, Unit.id == HitUnit.unit_id)
        ).all()
        assert len(seen) == len(set(seen)) > 0
    # the export, the report and the rule's table name the sign-flip test, and its bounds agree with its claims
    out = tmp_path / "runs" / "stb-demo"
    rule = json.loads((out / "export" / "study.json").read_text())["stopping"]
    assert rule["method"].startswith("worker sign-flip group-sequential test") and "not a confidence" in rule["bounds"]
    for row in rule["intervals"]:
        assert 0 <= row["low"] <= row["estimate"] <= row["high"] <= 1
        assert (row["winner"] is not None) == (row["low"] > 0.5 or row["high"] < 0.5)
    text = report(out).markdown.read_text()
    assert "the bounds are the estimate ± the distance from ½" in text and "exchangeable" in text
    # the live rule takes HITs as they were handed in (the adaptive design posts them out of HIT order)
    from hitkit.running.stopping import in_arrival_order, sequential_module, unit_payloads, watched_systems
    from hitkit.study.stored import StudyContext, resolve_secret

    with session_scope(one_database_url) as s:
        ctx = StudyContext.of(s.scalar(select(Study)), resolve_secret(one_database_url))
        order = in_arrival_order(s, ctx.study_id, ctx.task.export(s, s.scalar(select(Study))))["assignments"]
        handed = s.execute(
            select(Assignment.provider_assignment_id, Assignment.id)
            .where(Assignment.status.in_(("submitted", "approved", "rejected")))
            .order_by(Assignment.submitted_at, Assignment.id)
        ).all()
        assert list(order["assignment_id"]) == [p or str(i) for p, i in handed]
        if rule["fired"]:  # the verdicts it fired on are the rule's on the first HITs handed in, in that order
            tables = in_arrival_order(s, ctx.study_id, ctx.task.export(s, s.scalar(select(Study))))
            first = tables["assignments"].iloc[: rule["fired_after_hits"]]
            cut = {"assignments": first}
            cut["annotations"] = tables["annotations"][
                tables["annotations"]["assignment_id"].isin(first["assignment_id"])
            ]
            module = sequential_module(ctx.config)
            plan = module.planned(unit_payloads(s, ctx.study_id), ctx.config)
            watched = [c for c in module.comparisons(cut, watched_systems(ctx), plan) if c.planned > 0]
            found = intervals(watched, rule["alpha"])
            assert {(i.a, i.b): i.winner for i in found} == {
                (r["system_a"], r["system_b"]): r["winner"] for r in rule["intervals"]
            }


@pytest.mark.parametrize(
    "quality, stops",
    [
        ({"anna": 0.95, "bert": 0.3, "cleo": 0.2, "dora": 0.1}, True),
        ({"anna": 0.5, "bert": 0.5, "cleo": 0.5, "dora": 0.5}, False),
    ],
    ids=["wide", "equal"],
)
def test_an_adaptive_live_chat_study_stops_early_only_when_one_system_is_far_better(
    tmp_path,
    one_database_url,
    bot_server,  # noqa: F811 - the fixture imported above
    quality,
    stops,
):
    # Four systems, three in each HIT (the design picks which), so a pair is in half of the HITs: the bounded
    # sequence over HITs needs about 20 HITs holding a pair before it can settle it at α/10. The equal case
    # runs its whole design: eight HITs, each a look for the rule.
    study_file = live_chat_study(tmp_path, one_database_url, bot_server, hits=60 if stops else 8, slots_per_hit=4)
    data = yaml.safe_load(study_file.read_text())
    data["systems"] = [s for s in data["systems"] if s["name"] in {*quality, "qc"}]
    adaptive(study_file, data, {**quality, "qc": 0.02}, min_hits=3, per_worker_cap=2)
    launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=400)
    assert_stopped_early_only_if(stops, one_database_url, "anna")
    with session_scope(one_database_url) as s:
        # Every posted HIT kept its shape: three real systems and the QC slot.
        for hit in s.scalars(select(Hit).where(Hit.status != "withdrawn")):
            payloads = [hu.unit.payload for hu in hit.units]
            assert sum(p["is_control"] for p in payloads) == 1 and len({p.get("system") for p in payloads}) == 4


def _adaptive_rating(tmp_path, database_url, quality, prompts: int = 30):
    """The example rating study on its first ``prompts`` prompts (of 30), five items a HIT, adaptive."""
    from tests.studies import REPO

    data = yaml.safe_load((REPO / "examples" / "rating.yaml").read_text())
    responses = (REPO / "examples" / "data" / "ab_responses.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "responses.jsonl").write_text("".join(responses[:prompts]))
    data["rating"]["responses"] = str(tmp_path / "responses.jsonl")
    data["rating"]["items_per_hit"] = 5
    data.update(out=str(tmp_path / "runs"), database=database_url)
    data["simulated"]["seconds_per_answer"] = 0
    return adaptive(tmp_path / "study.yaml", data, quality, min_hits=3, qc_failures="pay")


@pytest.mark.parametrize(
    "quality, stops",
    [({"alpha": 0.95, "beta": 0.3, "gamma": 0.1}, True), ({"alpha": 0.5, "beta": 0.5, "gamma": 0.5}, False)],
    ids=["wide", "equal"],
)
def test_an_adaptive_rating_study_stops_early_only_when_one_system_is_far_better(
    tmp_path, one_database_url, quality, stops
):
    launch(
        # The equal case runs its whole design, on 12 of the 30 prompts: each of its HITs a look for the rule.
        _adaptive_rating(tmp_path, one_database_url, quality, prompts=30 if stops else 12),
        yes=True,
        show_progress=False,
        echo=lambda _m: None,
        timeout_s=300,
    )
    assert_stopped_early_only_if(stops, one_database_url, "alpha")


def test_a_dry_run_states_the_stopping_rule_and_that_its_cost_is_a_ceiling(tmp_path):
    from click.testing import CliRunner

    from hitkit.cli import main

    study = pairwise_study(
        tmp_path,
        f"sqlite:///{tmp_path / 'db.sqlite'}",
        design="adaptive",
        stop={"decision": "pair", "systems": ["alpha", "gamma"], "alpha": 0.01},
    )
    run = CliRunner().invoke(main, ["launch", str(study), "--dry-run"])
    assert run.exit_code == 0, run.output
    assert "Stopping rule: pair (one named pair of systems" in run.output and "α = 0.01" in run.output
    assert "adaptive design" in run.output and not (tmp_path / "db.sqlite").exists()


def test_asymptotic_sequences_looked_at_after_every_hit_keep_false_claims_near_alpha(monkeypatch):
    # Three equal live-chat systems, two in each HIT, a look after every HIT up to 60: the share of studies
    # in which the a–b interval ever excludes 0 stays near α; without the floor on observations it does not.
    from hitkit.analysis import sequential
    from hitkit.protocols.live_chat.sequential import from_hit_sums

    systems, plan = ["a", "b", "c"], {("a", "b"): 60.0, ("a", "c"): 60.0, ("b", "c"): 60.0}

    def false_claims(seed: int, studies: int = 150, hits: int = 60) -> float:
        rng, claims = np.random.default_rng(seed), 0
        for _ in range(studies):
            sums, counts = np.zeros((hits, 3)), np.zeros((hits, 3))
            for t in range(hits):
                held = rng.choice(3, size=2, replace=False)
                sums[t, held] += rng.normal(size=2)
                counts[t, held] += 1
            claims += any(
                i.winner
                for n in range(1, hits + 1)
                for i in intervals(
                    [c for c in from_hit_sums(sums[:n], counts[:n], n, systems, plan) if (c.a, c.b) == ("a", "b")], 0.05
                )
            )
        return claims / studies

    assert false_claims(seed=1) <= 0.06
    monkeypatch.setattr(sequential, "MIN_ASYMPTOTIC", 2)
    assert false_claims(seed=1) > 0.12


def test_a_study_launched_before_stopping_rules_existed_resumes_but_cannot_gain_a_rule(tmp_path, one_database_url):
    database_url = one_database_url  # one store: what this test checks is not storage
    from hitkit.errors import HitkitError

    one_vote = {"votes_per_prompt": 1}  # 9 HITs, not 27: the resume is the subject, not the design's size

    with pytest.raises(HitkitError):  # the budget stops it before the end
        launch(
            pairwise_study(tmp_path, database_url, budget="4.00", pairwise=one_vote),
            yes=True,
            show_progress=False,
            echo=lambda _m: None,
            timeout_s=60,
        )
    with session_scope(database_url) as s:  # as an older hitkit stored it: no design, stop, judge, authenticity
        study = s.scalar(select(Study))
        study.config = {k: v for k, v in study.config.items() if k not in ("design", "stop", "judge", "authenticity")}
    with pytest.raises(HitkitError, match="stop changed since the study was launched"):
        launch(
            pairwise_study(tmp_path, database_url, budget="60.00", stop={"decision": "best"}, pairwise=one_vote),
            yes=True,
            resume=True,
            show_progress=False,
            echo=lambda _m: None,
            timeout_s=10,
        )
    launch(
        pairwise_study(tmp_path, database_url, budget="60.00", pairwise=one_vote),
        yes=True,
        resume=True,
        show_progress=False,
        echo=lambda _m: None,
        timeout_s=120,
    )
    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"


def test_a_rule_on_the_quality_control_bot_or_beside_a_judge_is_refused_with_the_reason():
    chat = {
        "study": "c",
        "task": "live_chat",
        "budget": "10",
        "systems": [{"name": n, "url": "http://127.0.0.1:9", "model": n} for n in ("a", "b", "qc")],
        "live_chat": {"hits": 2, "slots_per_hit": 3, "control": "qc"},
    }
    with pytest.raises(ConfigError, match="stop.systems names the quality-control system qc"):
        parse_study({**chat, "stop": {"decision": "pair", "systems": ["a", "qc"]}})
    with pytest.raises(ConfigError, match="stop: and judge: cannot be used together yet"):
        _study(stop={"decision": "best"}, judge={"url": "http://127.0.0.1:9", "model": "j", "human_share": 0.5})


def test_a_provider_that_fails_to_close_a_hit_when_the_rule_fires_is_asked_again_next_tick(
    tmp_path, database_url, monkeypatch
):
    from hitkit.analysis.sequential import RuleState
    from hitkit.providers.simulated import SimulatedProvider
    from hitkit.running import stopping
    from hitkit.running.scheduler import tick
    from tests.test_dashboard import do_hit, make_study

    ctx = make_study(tmp_path, database_url, stop={"decision": "best"})
    do_hit(database_url, ctx, "W-close")
    monkeypatch.setattr(stopping, "rule_state", lambda session, c: RuleState("best", True, "alpha is best", []))
    calls = []

    def flaky(self, provider_hit_id):
        calls.append(provider_hit_id)
        if len(calls) == 1:
            raise ConnectionError("the provider is down")

    monkeypatch.setattr(SimulatedProvider, "expire_hit", flaky)
    tick(database_url, "ab-demo", "http://127.0.0.1:9")
    with session_scope(database_url) as s:
        closed = s.scalars(select(Hit.id).where(Hit.status == "closed")).all()
        assert closed and s.scalar(select(func.count()).select_from(Event).where(Event.kind == "expire_failed")) == 1
        assert stopping.left_open_on_provider(s, ctx.study_id)[0]  # one HIT still to close on the provider
    tick(database_url, "ab-demo", "http://127.0.0.1:9")
    tick(database_url, "ab-demo", "http://127.0.0.1:9")
    with session_scope(database_url) as s:
        assert stopping.left_open_on_provider(s, ctx.study_id) == ([], False)
    assert len(calls) == len(closed) + 1  # each closed HIT acknowledged once, the failed one asked twice
