"""Bytes of a text file -> (text, encoding name), or `NotText` with the reason.

Order, strictest first, so a decoding is only accepted when the bytes leave no doubt:
1. a byte-order mark (UTF-8, UTF-16, UTF-32);
2. UTF-16 without a mark only when NUL bytes sit at alternate positions (ASCII-range UTF-16);
3. any other NUL byte means a binary file;
4. strict UTF-8;
5. GB18030 when the non-ASCII bytes come in multi-byte runs (Chinese text), else Windows-1252 / Latin-1,
   whose non-ASCII letters are mostly single bytes between ASCII ones. (Decoding Latin-1 as UTF-16
   because its byte count is even produced CJK mojibake; decoding it as GB18030 can succeed too, so the
   byte pattern decides, not whether a codec happens to accept the bytes.)
Decoded text with many control characters is refused as binary.
"""

from __future__ import annotations

import codecs
import re

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_HIGH_RUN = re.compile(rb"[\x80-\xff]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
MAX_CONTROL_SHARE = 0.01


class NotText(ValueError):
    """The bytes are not a text document; the message says why."""


def decode_text(raw: bytes) -> tuple[str, str]:
    """Return (text, encoding name); raise `NotText` for binary content."""
    text, encoding = _decode(raw)
    if text:
        controls = len(_CONTROL.findall(text[:200_000]))
        if controls > MAX_CONTROL_SHARE * min(len(text), 200_000):
            raise NotText(f"binary content ({controls} control characters in the first {min(len(text), 200_000)})")
    return text, encoding


def _decode(raw: bytes) -> tuple[str, str]:
    for bom, name in _BOMS:
        if raw.startswith(bom):
            try:
                return raw.decode(name), name.replace("-sig", "") + " (BOM)"
            except UnicodeDecodeError as exc:
                raise NotText(f"starts with a {name} byte-order mark but is not valid {name} ({exc.reason})") from None
    if b"\x00" in raw:
        utf16 = _bomless_utf16(raw)
        if utf16 is None:
            raise NotText("binary content (NUL bytes)")
        return utf16
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    runs = [len(m) for m in _HIGH_RUN.findall(raw)]
    multi = sum(n for n in runs if n >= 2)
    if multi >= 0.8 * sum(runs):
        try:
            return raw.decode("gb18030"), "gb18030"
        except UnicodeDecodeError:
            pass
    try:
        return raw.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
        return raw.decode("latin-1"), "latin-1"


def _bomless_utf16(raw: bytes) -> tuple[str, str] | None:
    """UTF-16 without a mark: accepted only when (nearly) every other byte is NUL, as in mostly-ASCII text."""
    if len(raw) % 2:
        return None
    even, odd = raw[0::2], raw[1::2]
    half = len(raw) // 2
    for zeros, name in ((odd, "utf-16-le"), (even, "utf-16-be")):
        other = even if zeros is odd else odd
        if zeros.count(0) >= 0.9 * half and other.count(0) == 0:
            try:
                return raw.decode(name), name
            except UnicodeDecodeError:
                return None
    return None
