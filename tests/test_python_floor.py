"""hitkit runs on Python 3.10 (``requires-python`` in pyproject.toml), so it must not use what came later.

``datetime.UTC`` came in Python 3.11. The MTurk provider used it when imported (``EXPIRED_AT``) and the
Prolific provider when it settled a bonus whose pay call went out without an answer; mypy, which checks
for Python 3.10, found both once the providers came off its ignore list. This test runs them with
``datetime.UTC`` taken away, as on Python 3.10.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

AS_ON_PYTHON_3_10 = """
import datetime
del datetime.UTC
from decimal import Decimal
from hitkit.providers import mturk, mturk_posting
from hitkit.providers.base import PendingBonus
from hitkit.providers.prolific import bonuses

class NothingPaid:
    def call(self, method, path, body=None):
        return {"bonus_payments": []}

bonus = PendingBonus("key", "worker", "submission", Decimal("1.00"), "sending", None)
sent_long_ago = datetime.datetime(2020, 1, 1)  # as a database without time zones gives it back
print(mturk_posting.EXPIRED_AT.isoformat(), bonuses.settle_sent(NothingPaid(), bonus, sent_long_ago).value)
"""


def test_the_providers_need_no_datetime_utc_which_python_3_10_lacks():
    run = subprocess.run(
        [sys.executable, "-c", AS_ON_PYTHON_3_10], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["2015-01-01T00:00:00+00:00", "unpaid"]
