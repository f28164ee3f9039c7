"""Prolific's REST API v1 as a small client, and Prolific's pay rules as pure functions.

The client knows HTTP only: the token (from the environment), bounded back-off on 429, Prolific's
errors turned into :class:`ProlificError`, and ``_links.next.href`` pagination. It touches no
database: :mod:`hitkit.providers.prolific.provider` decides what to call and what to remember.

Sources: Prolific's API reference (``prolific-openapi.yml`` in the shared docs) and PLATFORMS.md.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterator
from decimal import ROUND_CEILING, Decimal
from typing import Any

import requests

from hitkit.errors import ConfigError, HitkitError

log = logging.getLogger(__name__)

MAX_RETRIES = 5
MAX_WAIT_S = 60.0
UNCERTAIN_STATUSES = (500, 502, 504)
"""Server and gateway errors that may come after Prolific did the work: the outcome is unknown."""

MIN_HOURLY_REWARD = {"GBP": Decimal("6.00"), "USD": Decimal("8.00")}
"""Prolific's minimum pay per hour of ``estimated_completion_time`` (PLATFORMS.md, pay rules)."""

SUBMISSION_ID_CHARS = 24
"""Prolific ids (studies, submissions, participants) are 24 hexadecimal characters."""


class ProlificError(HitkitError):
    """Prolific refused or failed a call; the message names the call and Prolific's answer.

    ``status`` is Prolific's HTTP status, None when no answer came at all. ``permanent`` marks a
    refusal that repeating the same call cannot cure (a 4xx other than 429, or a rule hitkit checks
    before calling): the coordinator must change something first.
    """

    def __init__(self, message: str, status: int | None = None, permanent: bool | None = None):
        super().__init__(message)
        self.status = status
        self.permanent = (
            permanent if permanent is not None else (status is not None and 400 <= status < 500 and status != 429)
        )

    @property
    def outcome_unknown(self) -> bool:
        """True when the call may have done its work: no answer, or a server error after the fact."""
        return self.__cause__ is not None or self.status in UNCERTAIN_STATUSES


def is_prolific_id(value: str | None) -> bool:
    """Whether ``value`` has the shape of a Prolific id (24 hex characters), safe to put in a URL path."""
    return value is not None and len(value) == SUBMISSION_ID_CHARS and all(c in "0123456789abcdefABCDEF" for c in value)


# -- pay rules ---------------------------------------------------------------------------------------


def minimum_reward(estimated_minutes: float, currency: str) -> Decimal | None:
    """The least reward Prolific accepts for this estimate (rounded up to a cent); None for an unknown currency."""
    hourly = MIN_HOURLY_REWARD.get(currency.upper())
    if hourly is None:
        return None
    return (hourly * Decimal(str(estimated_minutes)) / 60).quantize(Decimal("0.01"), rounding=ROUND_CEILING)


def minimum_allowed_minutes(estimated_minutes: float) -> int:
    """Prolific's least ``maximum_allowed_time``: 2 + 2X + 2√X minutes for an estimate of X (API reference)."""
    x = float(estimated_minutes)
    return math.ceil(2 + 2 * x + 2 * math.sqrt(x) - 1e-9)


def pay_rule_problems(
    reward: Decimal, currency: str, estimated_minutes: float, maximum_allowed_minutes: float
) -> list[str]:
    """What Prolific would refuse about this pay and time, each with the fix; empty when all is well."""
    problems = []
    least = minimum_reward(estimated_minutes, currency)
    if least is None:  # a currency MIN_HOURLY_REWARD does not name
        problems.append(
            f"provider.currency is '{currency}', but a Prolific workspace pays in GBP or USD; "
            f"set provider.currency to your workspace's currency"
        )
    elif Decimal(reward) < least:
        hourly = MIN_HOURLY_REWARD[currency.upper()]
        problems.append(
            f"hit.reward {reward} {currency} for provider.prolific.estimated_minutes "
            f"{estimated_minutes} is {Decimal(reward) * 60 / Decimal(str(estimated_minutes)):.2f} "
            f"{currency}/hour, under Prolific's minimum of {hourly} {currency}/hour; raise hit.reward "
            f"to at least {least} (or lower estimated_minutes if the task is shorter)"
        )
    floor = minimum_allowed_minutes(estimated_minutes)
    if maximum_allowed_minutes < floor:
        problems.append(
            f"hit.assignment_minutes {maximum_allowed_minutes:g} is Prolific's maximum_allowed_time, "
            f"which must be at least 2 + 2X + 2√X = {floor} minutes for an estimate of X = "
            f"{estimated_minutes} minutes; raise hit.assignment_minutes to {floor} or more"
        )
    return problems


def fee_rate(service_rate: Decimal, vat_rate: Decimal) -> Decimal:
    """Prolific's fee on a reward or bonus as one rate: the service fee plus VAT on that fee."""
    return service_rate * (1 + vat_rate)


# -- the client -------------------------------------------------------------------------------------


class ProlificClient:
    """Calls to one Prolific API root with one token; ``on_call`` hears of every call (for the audit log)."""

    timeout_s = 30.0
    """Seconds to wait for Prolific's answer to one call."""

    def __init__(
        self, api_url: str, token_env: str, on_call: Callable[[str, str, int | None, int], None] | None = None
    ):
        self.api_url = api_url.rstrip("/")
        self.token_env = token_env
        self.on_call = on_call
        self.http = requests.Session()

    def token(self) -> str:
        """The API token from the environment; ConfigError naming the variable when it is not set."""
        token = os.environ.get(self.token_env)
        if not token:
            raise ConfigError(
                f"the Prolific API token is read from the environment variable {self.token_env}, "
                f"which is not set; export it (or set provider.prolific.token_env to the variable "
                f"that holds the token)"
            )
        return token

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One API call with bounded back-off on 429; the parsed JSON answer (None when empty)."""
        return self.call_with_headers(method, path, body)[0]

    def call_with_headers(self, method: str, path: str, body: Any = None) -> tuple[Any, dict[str, str]]:
        """:meth:`call`, and the answer's headers (a webhook subscription's secret comes in one)."""
        url = path if path.startswith(("http://", "https://")) else self.api_url + path
        headers = {"Authorization": f"Token {self.token()}"}
        for attempt in range(MAX_RETRIES + 1):
            try:
                resp = self.http.request(method, url, json=body, headers=headers, timeout=self.timeout_s)
            except requests.RequestException as exc:
                self._heard(method, path, None, attempt)
                raise ProlificError(f"Prolific did not answer {method} {path}: {exc}") from exc
            if resp.status_code == 429 and attempt < MAX_RETRIES:
                wait = retry_after(resp.headers.get("Retry-After"), attempt)
                log.info("Prolific throttled %s %s; waiting %.1fs", method, path, wait)
                time.sleep(wait)
                continue
            break
        self._heard(method, path, resp.status_code, attempt)
        if resp.status_code >= 400:
            raise ProlificError(
                f"Prolific refused {method} {path} with HTTP {resp.status_code}: {resp.text[:500]}", resp.status_code
            ) from None
        headers = dict(resp.headers)
        if not resp.content:
            return None, headers
        try:
            return resp.json(), headers
        except ValueError:
            return resp.text, headers

    def pages(self, path: str) -> Iterator[dict[str, Any]]:
        """Every item of a paginated list, following ``_links.next.href`` to the end (API reference)."""
        seen: set[str] = set()
        here: str | None = path
        while here:
            if here in seen:  # a page pointing back at itself would loop forever
                raise ProlificError(f"Prolific's pagination repeats {here}")
            seen.add(here)
            page = self.call("GET", here) or {}
            yield from page.get("results") or []
            nxt = (page.get("_links") or {}).get("next") or {}
            here = nxt.get("href") if isinstance(nxt, dict) else None

    def _heard(self, method: str, path: str, status: int | None, attempt: int) -> None:
        log.debug("Prolific %s %s -> %s (attempt %d)", method, path, status, attempt)
        if self.on_call is not None:
            self.on_call(method, path, status, attempt)


def retry_after(header: str | None, attempt: int) -> float:
    """Seconds to wait after a 429: Prolific's Retry-After when given, else exponential, capped."""
    try:
        wait = float(header) if header is not None else 2.0**attempt
    except ValueError:
        wait = 2.0**attempt
    return max(0.0, min(wait, MAX_WAIT_S))
