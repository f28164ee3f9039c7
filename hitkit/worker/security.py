"""Web-tier security policy as pure functions: response headers, CSRF, rate limits, log redaction.

``server/`` applies these to every request; nothing here knows about HTTP frameworks, so each rule
is testable on plain values. ``docs/THREAT_MODEL.md`` says which threat each one answers.

The assignment token in the path (``/a/<study>/<token>/…``) is the worker's capability: whoever
holds it can act on that one assignment, nobody else can. Cookies are never used, because
browsers drop or partition third-party cookies inside the crowd site's iframe. So the CSRF
defence is the token plus a rule on *how* a state change may arrive (:func:`csrf_refusal`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from hitkit.errors import ConfigError

PROVIDER_FRAME_ANCESTORS = (
    "https://*.mturk.com",
    "https://workersandbox.mturk.com",
    "https://worker.mturk.com",
    "https://*.prolific.com",
    "https://app.prolific.com",
)
"""Sites that show our worker pages in an iframe: MTurk's ExternalQuestion and Prolific."""

_SOURCE = re.compile(r"(?:'self'|'none'|(?:https?://)?(?:\*\.)?[A-Za-z0-9.-]+(?::(?:\d+|\*))?/?|https?:)")
"""One CSP source; always ``fullmatch`` (``$`` would pass a source ending in a newline into the header)."""


def frame_ancestors(configured: str | None) -> tuple[str, ...]:
    """The CSP ``frame-ancestors`` sources: ``'self'`` plus the providers' sites, or the
    space-separated sources of HITKIT_FRAME_ANCESTORS instead of the providers' when set."""
    if configured is None or not configured.strip():
        return ("'self'", *PROVIDER_FRAME_ANCESTORS)
    sources = configured.split()
    bad = [s for s in sources if not _SOURCE.fullmatch(s)]
    if bad:
        raise ConfigError(
            f"HITKIT_FRAME_ANCESTORS has {bad[0]!r}, which is not a CSP source; give origins "
            "such as https://app.prolific.com separated by spaces"
        )
    if "'none'" in sources:
        return ("'none'",)
    return ("'self'", *[s for s in sources if s != "'self'"])


def content_security_policy(ancestors: tuple[str, ...]) -> str:
    """The policy of every response: our own scripts, styles and fetches only; framed only by ``ancestors``.

    No ``form-action``: the hand-back form posts to the crowd site (MTurk's externalSubmit) and
    the submit redirects there (Prolific), and browsers apply form-action to those redirects too.
    """
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "object-src 'none'",
            "base-uri 'none'",
            "frame-ancestors " + " ".join(ancestors),
        ]
    )


def security_headers(ancestors: tuple[str, ...]) -> dict[str, str]:
    """Headers set on every response. Deliberately no X-Frame-Options: it would stop the crowd
    site's iframe, and CSP frame-ancestors is the modern, allow-listing form of the same control."""
    return {
        "Content-Security-Policy": content_security_policy(ancestors),
        "X-Content-Type-Options": "nosniff",
        # Tokens live in URLs: never send one to another site (or to a linked page) as a Referer.
        "Referrer-Policy": "no-referrer",
    }


# CSRF -----------------------------------------------------------------------------------------------
CSRF_FIELD = "csrf"
"""Name of the hidden form field that carries :func:`csrf_value`."""

FORM_CONTENT_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")
"""Content types another site can POST to us without a CORS preflight (an HTML form can send them)."""


def csrf_value(secret: str, token: str) -> str:
    """The hidden form field for the assignment ``token``: only a page we rendered can know it."""
    return hmac.new(secret.encode(), f"csrf:{token}".encode(), hashlib.sha256).hexdigest()[:32]


def csrf_refusal(
    secret: str,
    token: str | None,
    content_type: str | None,
    origin: str | None,
    fetch_site: str | None,
    form_value: str | None,
) -> str | None:
    """Why a POST must be refused as a possible cross-site forgery, or None to let it through.

    Allowed: a JSON body (cross-site, JSON needs a CORS preflight that we never grant); a form
    carrying the right :data:`CSRF_FIELD`; or a body-less request with neither ``Origin`` nor
    ``Sec-Fetch-Site`` (browsers send one of them on every POST, so it is a script, not a forgery
    riding on a worker's browser). Anything else a browser could send cross-site is refused.
    """
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime == "application/json" or (mime.startswith("application/") and mime.endswith("+json")):
        return None
    if token is not None and form_value and hmac.compare_digest(form_value, csrf_value(secret, token)):
        return None
    if not mime and origin is None and fetch_site is None:
        return None
    return (
        "this request did not come from the task page (its security field is missing or wrong); "
        "reload the task from the crowd site and try again"
    )


# Rate limits ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RateLimit:
    """A token bucket's shape: ``rate`` requests per second sustained, ``burst`` at once."""

    rate: float
    burst: float

    @classmethod
    def parse(cls, text: str | None, default: RateLimit, name: str) -> RateLimit:
        """``"RATE/BURST"`` (e.g. ``"20/200"``) from the environment variable ``name``; ``default`` if unset."""
        if text is None or not text.strip():
            return default
        try:
            rate, burst = (float(x) for x in text.split("/"))
        except ValueError:
            raise ConfigError(
                f"{name} is {text!r}; write requests per second and burst as RATE/BURST, e.g. 20/200"
            ) from None
        if rate <= 0 or burst < 1:
            raise ConfigError(f"{name} is {text!r}; the rate must be above 0 and the burst at least 1")
        return cls(rate, burst)


TOKEN_LIMIT = RateLimit(20, 200)
"""Per assignment token. The burst covers a simulated worker answering a 20-segment Spot The Bot
HIT (about 110 requests) without pause; a person never comes near it."""

ENTRY_LIMIT = RateLimit(20, 300)
"""Per client address, for arrivals (``/s/…``) and requests with a forged token. Generous: a lab
behind one NAT, or the simulated crowd on loopback, arrives from one address."""


class TokenBuckets:
    """In-process token buckets keyed by worker token or address, bounded to ``max_keys`` keys.

    Each gunicorn worker process has its own buckets, so the limit a client meets is per process:
    a flood is slowed in every process, which is what matters; it is not an exact global quota.
    """

    def __init__(self, limit: RateLimit, max_keys: int = 50_000, clock=time.monotonic):
        self.limit, self.max_keys, self._clock = limit, max_keys, clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """Spend one request of ``key``'s bucket: 0.0 if allowed, else the seconds until one is free."""
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.pop(key, (self.limit.burst, now))
            tokens = min(self.limit.burst, tokens + (now - last) * self.limit.rate)
            wait = 0.0 if tokens >= 1 else (1 - tokens) / self.limit.rate
            self._buckets[key] = (tokens - 1 if wait == 0.0 else tokens, now)
            while len(self._buckets) > self.max_keys:
                # The least recently seen key goes first; it has most likely refilled anyway.
                self._buckets.popitem(last=False)
        return wait


# Logs -----------------------------------------------------------------------------------------------
_TOKEN_PATH = re.compile(r"((?:^|[\s\"]|//[^/\s\"]+)/a/[^/\s\"]+/)[^/\s\"?#]+")
_QUERY = re.compile(r"\?[^\s\"#]*")


def redact_path(text: str) -> str:
    """``text`` (a path, URL or request line) with every assignment token and query string replaced:
    logs must never hold a token, nor an invite (``?invite=…``) or provider id from a query."""
    return _QUERY.sub("?<query>", _TOKEN_PATH.sub(r"\1<token>", text or ""))
