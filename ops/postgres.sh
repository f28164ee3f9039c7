#!/usr/bin/env bash
# PostgreSQL for hitkit's tests and for a single-host deployment (Debian).
#   ops/postgres.sh ensure   — make sure a server answers on 127.0.0.1:5432 with a database `test`
#                              that the `postgres` user reaches without a password; install
#                              Debian's postgresql and start a cluster if there is none.
set -euo pipefail
cmd="${1:-ensure}"
[ "$cmd" = "ensure" ] || { echo "usage: $0 ensure" >&2; exit 2; }

if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  echo "PostgreSQL is up on 127.0.0.1:5432"
  exit 0
fi
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "Installing Debian's postgresql…"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
version="$(ls /etc/postgresql | sort -V | tail -n 1)"
if [ -z "$version" ]; then
  echo "no PostgreSQL cluster found under /etc/postgresql" >&2
  exit 1
fi
hba="/etc/postgresql/$version/main/pg_hba.conf"
# Tests connect over loopback as `postgres` without a password, as on the development machines.
if ! grep -q "hitkit-test" "$hba"; then
  sed -i '1i host all all 127.0.0.1/32 trust # hitkit-test\nhost all all ::1/128 trust # hitkit-test' "$hba"
fi
pg_ctlcluster --skip-systemctl-redirect "$version" main start || pg_ctlcluster --skip-systemctl-redirect "$version" main reload
for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
pg_isready -h 127.0.0.1 -p 5432
psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='test'" | grep -q 1 \
  || psql -h 127.0.0.1 -U postgres -c "CREATE DATABASE test"
