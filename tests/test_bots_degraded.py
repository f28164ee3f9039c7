"""The degraded QC bot follows METHODS.md §1 exactly; its corpus loader names bad files and lines."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hitkit.bots.corpus import CorpusError, Dialogue, load_chatterbot_english, load_jsonl
from hitkit.bots.degraded import DegradedBackend, DegradedBot, distort, replacement_length
from hitkit.bots.protocol import ChatCompletionRequest

# METHODS.md §1: r by n — 1–3 → 1; 4–5 → 2; 6–8 → 3; 9–15 → 4; 16–29 → 5; ≥ 30 → ⌊n/5⌋.
TABLE = {1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3, 8: 3, 9: 4, 15: 4, 16: 5, 29: 5, 30: 6, 34: 6, 35: 7, 49: 9, 100: 20}


def expected_r(n: int) -> int:
    """The table written out independently of the implementation."""
    if n <= 3:
        return 1
    if n <= 5:
        return 2
    if n <= 8:
        return 3
    if n <= 15:
        return 4
    if n <= 29:
        return 5
    return n // 5


@pytest.mark.parametrize("n, r", sorted(TABLE.items()))
def test_replacement_length_table(n, r):
    assert replacement_length(n) == r


def test_replacement_length_rejects_empty():
    with pytest.raises(ValueError, match="at least one word"):
        replacement_length(0)


words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6)
sentences = st.lists(words, min_size=1, max_size=70).map(" ".join)


def check_distortion(original: str, result, donors: dict[str, Dialogue]) -> None:
    """Every property METHODS.md §1 states about one distorted reply."""
    before, after = original.split(), result.text.split()
    n, r = len(before), expected_r(len(before))
    assert len(after) == n
    assert result.length == r
    start = result.start
    assert after[:start] == before[:start] and after[start + r :] == before[start + r :]
    assert tuple(after[start : start + r]) == result.donor_words
    if n >= 3:
        assert start >= 1 and start + r <= n - 1  # neither the first nor the last word
    donor = donors[result.donor_id]
    run = list(result.donor_words)
    texts = [t.split() for t in donor.turns] + [" ".join(donor.turns).split()]
    assert any(t[i : i + r] == run for t in texts for i in range(len(t) - r + 1))


@settings(max_examples=300, deadline=None)
@given(
    response=sentences,
    donor_turns=st.lists(st.lists(sentences, min_size=1, max_size=4), min_size=1, max_size=5),
    seed=st.integers(0, 2**32 - 1),
)
def test_distort_replaces_exactly_r_words_inside_the_response(response, donor_turns, seed):
    donors = {f"d{i}": Dialogue(f"d{i}", tuple(turns)) for i, turns in enumerate(donor_turns)}
    longest = max(len(" ".join(d.turns).split()) for d in donors.values())
    if longest < expected_r(len(response.split())):
        with pytest.raises(ValueError, match="no donor dialogue has"):
            distort(response, list(donors.values()), random.Random(seed))
        return
    result = distort(response, list(donors.values()), random.Random(seed))
    check_distortion(response, result, donors)


@settings(max_examples=150, deadline=None)
@given(
    corpus=st.lists(st.lists(sentences, min_size=2, max_size=5), min_size=2, max_size=6), seed=st.integers(0, 2**32 - 1)
)
def test_degraded_bot_replies_follow_the_protocol(corpus, seed):
    dialogues = [Dialogue(f"c{i}", tuple(turns)) for i, turns in enumerate(corpus)]
    by_id = {d.id: d for d in dialogues}
    bot = DegradedBot(dialogues, seed=seed)
    for _ in range(5):
        try:
            reply = bot.sample()
        except CorpusError:
            # Only legitimate when no response can borrow r words from any other dialogue.
            assert all(
                max(len(" ".join(o.turns).split()) for o in dialogues if o.id != d.id) < expected_r(len(t.split()))
                for d in dialogues
                for t in d.turns[1:]
            )
            return
        source = by_id[reply.source_id]
        assert reply.source_turn >= 1 and source.turns[reply.source_turn] == reply.original
        assert reply.distortion.donor_id != reply.source_id  # a DIFFERENT training dialogue
        check_distortion(reply.original, reply.distortion, {k: v for k, v in by_id.items() if k != reply.source_id})


SMALL = [
    Dialogue("a", ("hello there", "I really like to walk my dog in the park every morning")),
    Dialogue("b", ("what do you do", "I work as a nurse at the city hospital near the river")),
    Dialogue("c", ("any plans", "we are going to the sea with our two children this summer")),
]


def test_degraded_bot_is_seeded_and_ignores_the_input():
    bot_a, bot_b, bot_c = DegradedBot(SMALL, seed=7), DegradedBot(SMALL, seed=7), DegradedBot(SMALL, seed=8)
    seq_a = [bot_a.reply([{"role": "user", "content": "tell me about cats"}]) for _ in range(10)]
    seq_b = [bot_b.reply([]) for _ in range(10)]
    seq_c = [bot_c.reply([]) for _ in range(10)]
    assert seq_a == seq_b  # same seed, different input: same replies
    assert seq_a != seq_c


def test_degraded_bot_needs_two_dialogues_with_responses():
    with pytest.raises(CorpusError, match="at least two distinct dialogues"):
        DegradedBot(SMALL[:1])
    with pytest.raises(CorpusError, match="no responses"):
        DegradedBot([Dialogue("a", ("only an opener",)), Dialogue("b", ("another opener",))])


def test_backend_caps_words_and_honours_stop():
    backend = DegradedBackend("qc", DegradedBot(SMALL, seed=1))
    req = ChatCompletionRequest(model="qc", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    capped = backend.complete(req)
    assert capped.finish_reason == "length" and capped.completion_tokens == 4
    stop = ChatCompletionRequest(model="qc", messages=[{"role": "user", "content": "hi"}], stop=[" "])
    cut = backend.complete(stop)
    # The first word survives distortion (n >= 3), and the reply ends at the first space.
    assert cut.text in {"I", "we"} and cut.finish_reason == "stop"
    assert backend.stats()["requests"] == 2


def write_lines(tmp_path, lines: list[str]):
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_jsonl_corpus_accepts_strings_and_speaker_turns(tmp_path):
    path = write_lines(
        tmp_path,
        [
            json.dumps({"id": "x1", "turns": ["Hi!", "Hello, how are you?"]}),
            "",
            json.dumps(
                {"id": 7, "turns": [{"speaker": "A", "text": "Hey"}, {"speaker": "B", "text": "Good evening to you"}]}
            ),
            json.dumps({"turns": ["no id here", "so the line names it"]}),
        ],
    )
    dialogues = load_jsonl(path)
    assert [d.id for d in dialogues] == ["x1", "7", "corpus.jsonl:4"]
    assert dialogues[1].turns == ("Hey", "Good evening to you")
    bot = DegradedBot.from_jsonl(path, seed=0)
    assert bot.reply([])


@pytest.mark.parametrize(
    "lines, message",
    [
        (['{"id": "a", "turns": ["x", "y"]}', '{"id": "b", "turns": ['], "corpus.jsonl:2: not valid JSON"),
        (['{"id": "a", "turns": "hello"}'], "corpus.jsonl:1: 'turns' must be a non-empty list"),
        (['{"id": "a", "turns": ["x", 3]}'], "corpus.jsonl:1: turn 1 must be a string"),
        (['{"id": "a", "turns": [{"speaker": "A"}]}'], "corpus.jsonl:1: turn 0 must be a string"),
        (['["x", "y"]'], "corpus.jsonl:1: expected a JSON object"),
        (
            ['{"id": "a", "turns": ["x", "y"]}', '{"id": "a", "turns": ["z", "w"]}'],
            "corpus.jsonl:2: dialogue id 'a' already used on line 1",
        ),
    ],
)
def test_bad_jsonl_names_file_and_line(tmp_path, lines, message):
    with pytest.raises(CorpusError) as info:
        load_jsonl(write_lines(tmp_path, lines))
    assert message in str(info.value)
    assert str(tmp_path) in str(info.value)


def test_empty_or_missing_corpus_file(tmp_path):
    with pytest.raises(CorpusError, match="holds no dialogues"):
        load_jsonl(write_lines(tmp_path, [""]))
    with pytest.raises(CorpusError, match="does not exist"):
        load_jsonl(tmp_path / "nope.jsonl")


def test_default_corpus_is_chatterbot_english():
    pytest.importorskip("chatterbot_corpus", reason="the default QC corpus needs chatterbot-corpus")
    dialogues = load_chatterbot_english()
    assert len(dialogues) > 1000
    assert any(d.id.startswith("greetings:") for d in dialogues)
    assert all(d.turns and all(t.strip() for t in d.turns) for d in dialogues)
    bot = DegradedBot(seed=0)
    reply = bot.sample()
    assert reply.distortion.donor_id != reply.source_id
