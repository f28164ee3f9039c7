#!/usr/bin/env bash
# Quickstart, first command: install hitkit into .venv and run the example A/B study
# (3 systems × 30 prompts) with the simulated crowd on the embedded default (SQLite, local server).
# Results: runs/ab-demo/export/*.csv and runs/ab-demo/analysis/*.csv. Running it again re-exports.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
resume=()
[ -f runs/ab-demo/hitkit.db ] && resume=(--resume)
exec .venv/bin/hitkit launch examples/pairwise.yaml --yes "${resume[@]}"
