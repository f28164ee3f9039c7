#!/usr/bin/env bash
# One line for ops/test.sh to print first (outside CI): which tests this machine will skip, and how to
# enable them. Browser tests need Debian's chromium (or HITKIT_CHROMIUM); the PostgreSQL runs need a
# server at HITKIT_TEST_PG (default postgresql://postgres@127.0.0.1:5432/test).
set -uo pipefail
pg="${HITKIT_TEST_PG:-postgresql://postgres@127.0.0.1:5432/test}"
skips=()
if [ -z "${HITKIT_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  skips+=("the browser tests (no chromium: apt-get install chromium)")
fi
if ! HITKIT_TEST_PG="$pg" python3 - <<'PY' 2>/dev/null; then
import os, socket, urllib.parse
url = urllib.parse.urlsplit(os.environ["HITKIT_TEST_PG"])
socket.create_connection((url.hostname or "127.0.0.1", url.port or 5432), timeout=2).close()
PY
  skips+=("the PostgreSQL runs (none at $pg: bash ops/postgres.sh ensure, or set HITKIT_TEST_PG)")
fi
if [ ${#skips[@]} -gt 0 ]; then
  echo "Will skip ${skips[0]}${skips[1]:+ and ${skips[1]}}; CI=true bash ops/test.sh installs both and skips nothing."
else
  echo "Running every test: chromium and PostgreSQL are here."
fi
