#!/usr/bin/env bash
# One line for ops/test.sh to print first (outside CI): which tests this machine will skip, and how to
# enable them. Browser tests need Debian's chromium (or HITKIT_CHROMIUM); the production deployment test
# needs Debian's nginx (or HITKIT_NGINX, as tests/test_deployment_nginx.py looks it up); the PostgreSQL
# runs need a server at HITKIT_TEST_PG (default postgresql://postgres@127.0.0.1:5432/test); the
# accessibility audits need axe-core, which ops/test.sh installs with npm (or HITKIT_AXE_JS, as tests/axe.py reads it).
set -uo pipefail
here="${BASH_SOURCE[0]%/*}"  # no dirname: the tests run this with python3 alone on the PATH
[ "$here" = "${BASH_SOURCE[0]}" ] && here=.
cd "$here/.."
pg="${HITKIT_TEST_PG:-postgresql://postgres@127.0.0.1:5432/test}"
skips=()
if [ -z "${HITKIT_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  skips+=("the browser tests (no chromium: apt-get install chromium)")
fi
if [ -n "${HITKIT_NGINX:-}" ]; then
  [ -x "$HITKIT_NGINX" ] || skips+=("the nginx deployment test (no nginx at HITKIT_NGINX=$HITKIT_NGINX)")
elif ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  skips+=("the nginx deployment test (no nginx: apt-get install nginx)")
fi
if ! HITKIT_TEST_PG="$pg" python3 - <<'PY' 2>/dev/null; then
import os, socket, urllib.parse
url = urllib.parse.urlsplit(os.environ["HITKIT_TEST_PG"])
socket.create_connection((url.hostname or "127.0.0.1", url.port or 5432), timeout=2).close()
PY
  skips+=("the PostgreSQL runs (none at $pg: bash ops/postgres.sh ensure, or set HITKIT_TEST_PG)")
fi
if ! { [ -n "${HITKIT_AXE_JS:-}" ] && [ -f "$HITKIT_AXE_JS" ]; } && [ ! -f .cache/npm/node_modules/axe-core/axe.min.js ] \
    && [ ! -f node_modules/axe-core/axe.min.js ] && ! command -v npm >/dev/null 2>&1; then
  skips+=("the accessibility audits (no npm to install axe-core: apt-get install npm)")
fi
n=${#skips[@]}
if [ "$n" -gt 0 ]; then
  listed="${skips[0]}"
  for ((i = 1; i < n; i++)); do
    if [ "$i" -eq $((n - 1)) ]; then listed+=" and ${skips[$i]}"; else listed+=", ${skips[$i]}"; fi
  done
  echo "Will skip $listed; CI=true bash ops/test.sh installs what they need and skips nothing."
else
  echo "Running every test: chromium, nginx, PostgreSQL and axe-core are here."
fi
