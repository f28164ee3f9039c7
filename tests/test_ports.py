"""Ports the coordinator chooses: a free one by default, printed; ``--port`` and ``--bot-port`` for a launch; the
study's own bot server named once (systems without a url talk to it)."""

from __future__ import annotations

import socket

import pytest

from hitkit.errors import ConfigError
from hitkit.running.bots import with_bot_server
from hitkit.running.resume import design
from hitkit.study.loading import load_study
from tests.studies import REPO, pairwise_study


def test_systems_without_a_url_talk_to_the_studys_bot_server_on_a_free_port_chosen_at_launch():
    config = load_study(REPO / "examples" / "live_chat.yaml")
    assert config.bots.serve.port == 0 and all(s.url is None for s in config.systems)
    served = with_bot_server(config)
    port = served.bots.serve.port
    assert port > 0 and {s.url for s in served.systems} == {f"http://127.0.0.1:{port}"}
    with socket.socket() as sock:  # the port was free when chosen
        sock.bind(("127.0.0.1", port))


def test_bot_port_moves_the_server_and_the_systems_that_named_it(tmp_path):
    config = load_study(REPO / "examples" / "live_chat.yaml")
    pinned = config.model_copy(
        update={
            "bots": config.bots.model_copy(update={"serve": config.bots.serve.model_copy(update={"port": 8011})}),
            "systems": [
                *[s.model_copy(update={"url": "http://127.0.0.1:8011"}) for s in config.systems[:2]],
                *config.systems[2:],
            ],
        }
    )
    moved = with_bot_server(pinned, 9321)
    assert moved.bots.serve.port == 9321 and {s.url for s in moved.systems} == {"http://127.0.0.1:9321"}
    kept = with_bot_server(pinned)  # no --bot-port: the file's port, and the systems that named it keep it
    assert {s.url for s in kept.systems} == {"http://127.0.0.1:8011"}


def test_bot_port_for_a_study_that_serves_no_bots_is_a_clear_error(tmp_path):
    config = load_study(pairwise_study(tmp_path, None))
    assert with_bot_server(config) is config
    with pytest.raises(ConfigError, match="--bot-port: this study serves no bots"):
        with_bot_server(config, 9000)


def test_a_resumed_study_may_find_its_bots_on_another_port():
    before = [{"name": "a", "url": "http://127.0.0.1:4000", "model": "m"}]
    after = [{"name": "a", "url": "http://127.0.0.1:5000", "model": "m"}]
    assert design("systems", before) == design("systems", after)
    assert design("systems", before) != design("systems", [{"name": "a", "url": None, "model": "other"}])
