"""Citations of the offline model: `[Data: Sources (1, 2); Entities (3, +more)]`, parsed and rendered."""

from __future__ import annotations

import re

CITATION_RE = re.compile(r"\[Data:\s*([^\]]*)\]")
# References a text carries from indexing time (report findings cite the index's own ids); they
# point at records that may not be in this context, so quoted sentences must not repeat them.
_EMBEDDED_REF_RE = re.compile(
    r"\s*\[(?:Data|Records|Sources?|Entities|Relationships|Reports|Claims)\b[^\]]*\]", re.IGNORECASE
)
_REF_RE = re.compile(r"([A-Za-z][A-Za-z ]*?)\s*\(([^)]*)\)")
DATASET_ORDER = ("Sources", "Entities", "Relationships", "Reports", "Claims")
MORE = "+more"


def strip_citations(text: str) -> str:
    return _EMBEDDED_REF_RE.sub("", text)


def parse_citation(body: str) -> dict[str, list[str]]:
    """Dataset -> ids (in order, '+more' kept as a marker) from the inside of one `[Data: ...]`."""
    refs: dict[str, list[str]] = {}
    for match in _REF_RE.finditer(body):
        dataset = match.group(1).strip()
        ids = [i.strip() for i in match.group(2).split(",") if i.strip()]
        bucket = refs.setdefault(dataset, [])
        for i in ids:
            if i not in bucket:
                bucket.append(i)
    return refs


def merge_refs(into: dict[str, list[str]], other: dict[str, list[str]]) -> None:
    for dataset, ids in other.items():
        bucket = into.setdefault(dataset, [])
        for i in ids:
            if i not in bucket:
                bucket.append(i)


def format_citation(refs: dict[str, list[str]], max_ids: int = 5) -> str:
    """Render refs in the canonical dataset order, at most `max_ids` ids each, then '+more'."""
    ordered = [d for d in DATASET_ORDER if refs.get(d)] + [
        d for d in refs if d not in DATASET_ORDER and refs[d]
    ]
    parts = []
    for dataset in ordered:
        ids = [i for i in refs[dataset] if i != MORE]
        more = len(ids) > max_ids or MORE in refs[dataset]
        shown = ids[:max_ids] + ([MORE] if more else [])
        if shown:
            parts.append(f"{dataset} ({', '.join(shown)})")
    return f"[Data: {'; '.join(parts)}]" if parts else ""
