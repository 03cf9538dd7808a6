"""Secrets never leave: the one redaction every outward text goes through (error messages, log records,
`/healthz`, `graphroute config --show`, the start-up lines).

What is hidden (replaced by `MASK`):
- every value this process was told is secret (`remember_secret`): API keys of the model endpoints and of the
  service, and every value a settings file took from a `${VAR}` (a variable may hold a key however it is used);
- in any URL: the user name and password (`http://user:pass@host`) and the values of query parameters that
  name a key, token, signature, secret or password;
- strings shaped like provider API keys (`sk-...`) and `Bearer` tokens.
"""

from __future__ import annotations

import logging
import re
import reprlib
import threading
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
# Keys and tokens are longer; a shorter value ("test", "none", "0.5", a model name) would mask that word in
# every message this process writes.
MIN_SECRET_CHARS = 8
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>()\[\]{}]+")
_KEY_LIKE = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{8,}")
_SECRET_PARAM = re.compile(r"key|token|secret|sig|signature|password|passwd|auth|credential", re.IGNORECASE)


class _Secrets:
    """The secret values this process knows of (keys read from the configuration, `${VAR}` values)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add(self, value: str) -> None:
        value = value.strip()
        if len(value) < MIN_SECRET_CHARS:
            return
        with self._lock:
            if value not in self._values:
                self._values.add(value)
                self._pattern = None

    def pattern(self) -> re.Pattern[str] | None:
        with self._lock:
            if self._pattern is None and self._values:
                longest_first = sorted(self._values, key=len, reverse=True)
                self._pattern = re.compile("|".join(map(re.escape, longest_first)))
            return self._pattern


_SECRETS = _Secrets()


def remember_secret(value: object) -> None:
    """Hide `value` (a str) wherever this process prints or sends text from now on."""
    if isinstance(value, str):
        _SECRETS.add(value)


def redact_url(url: str) -> str:
    """`url` without its user info and the values of its secret query parameters."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:  # not a URL after all (an unbalanced "[" in the host): hide what follows the scheme
        return url.split("://", 1)[0] + "://" + MASK
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, MASK if _SECRET_PARAM.search(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact(text: str) -> str:
    """`text` with every secret it holds replaced by `MASK` (see the module docstring)."""
    if not text:
        return text
    known = _SECRETS.pattern()
    if known is not None:
        text = known.sub(MASK, text)
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    return _KEY_LIKE.sub(MASK, text)


_SHORT = reprlib.Repr()
_SHORT.maxstring = 80
_SHORT.maxother = 80
_SHORT.maxlevel = 3


def short_repr(value: object) -> str:
    """A bounded, redacted repr for error messages: a huge or deeply nested value is cut, a secret hidden."""
    return redact(_SHORT.repr(value))


def capped(text: str, limit: int = 1_000) -> str:
    """`text` cut to `limit` characters (an error message that quotes its input stays readable)."""
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit:,} more characters)"


class RedactingFilter(logging.Filter):
    """A log filter that redacts every record's message (the arguments are merged into it first)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True


def redact_logs(logger: logging.Logger) -> None:
    """Redact every record logged on `logger` (the filter is added once)."""
    if not any(isinstance(f, RedactingFilter) for f in logger.filters):
        logger.addFilter(RedactingFilter())
