"""API keys bound to indexes: which indexes each caller may read (`[serve] key_indexes`, `keys_file`).

A bound key sees only its indexes, everywhere: listings, answers, records, the graph view and metrics labels.
Any other name is "unknown" in exactly the words an index that does not exist gets, so a caller cannot find
out which indexes a server holds besides its own. Without bindings every caller sees every index.
"""

from __future__ import annotations

import hmac
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from engines.config import ServeConfig


class TenantConfigError(ValueError):
    """The key bindings name an index the server does not hold, or the keys file cannot be read."""


class Tenants:
    def __init__(self, keys: Sequence[str], bindings: Mapping[str, Sequence[str]], indexes: Sequence[str]) -> None:
        """`keys`: every API key in caller order (`Guard` numbers callers by it); `bindings`: key -> index
        names; `indexes`: the server's indexes, in order."""
        self.indexes = list(indexes)
        for n, names in enumerate(bindings.values()):
            unknown = [name for name in names if name not in self.indexes]
            if unknown:  # the key itself is never printed: the error goes to logs and terminals
                raise TenantConfigError(f"key binding {n + 1} names {', '.join(map(repr, unknown))}, not among the "
                                        f"indexes served ({', '.join(self.indexes)})")
            if not names:
                raise TenantConfigError(f"key binding {n + 1} binds its key to no index")
        self._keys = [k.encode() for k in keys]
        self._by_caller = [list(bindings[k]) if k in bindings else None for k in keys]
        self.bound = bool(bindings)

    @classmethod
    def from_config(cls, keys: Sequence[str], config: ServeConfig, indexes: Sequence[str]) -> tuple[Tenants, list[str]]:
        """The bindings of `[serve] key_indexes` and `keys_file`, and the API keys with the bound keys added."""
        bindings: dict[str, list[str]] = {k: list(v) for k, v in config.key_indexes.items()}
        if config.keys_file:
            bindings.update(read_keys_file(config.keys_file))
        all_keys = [*keys, *(k for k in bindings if k not in keys)]
        return cls(all_keys, bindings, indexes), all_keys

    def visible(self, caller: int | None, authorized: bool) -> list[str]:
        """The indexes a request may read: a bound key's own; every index for an unbound key (or when no
        key is needed); none for a request without a valid key while bindings exist."""
        if not self.bound:
            return list(self.indexes)
        if not authorized or caller is None:
            return []
        own = self._by_caller[caller] if 0 <= caller < len(self._by_caller) else None
        return list(self.indexes) if own is None else [n for n in self.indexes if n in own]


    def for_key(self, key: str | None) -> list[str]:
        """The indexes a request carrying `key` may read (every key compared in constant time)."""
        given = (key or "").encode()
        caller = None
        for i, known in enumerate(self._keys):
            if hmac.compare_digest(given, known):
                caller = i
        return self.visible(caller, caller is not None)


def read_keys_file(path: str | Path) -> dict[str, list[str]]:
    """`[keys]` of a TOML keys file: "KEY" = ["index", ...]."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TenantConfigError(f"cannot read the keys file {path}: {exc}") from None
    keys = data.get("keys")
    if not isinstance(keys, dict):
        raise TenantConfigError(f"the keys file {path} has no [keys] table of \"KEY\" = [\"index\", ...]")
    out: dict[str, list[str]] = {}
    for n, (key, names) in enumerate(keys.items()):
        if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
            raise TenantConfigError(f"the keys file {path}: binding {n + 1} must be a list of index names")
        out[str(key)] = list(names)
    return out
