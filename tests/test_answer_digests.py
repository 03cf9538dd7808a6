"""The offline answers and contexts of a fixed set of questions on the Christmas Carol fixture, pinned by digest.

A change meant to leave behaviour alone (moving code between modules, caching, precomputing at open) must leave
every question's engine, context text, answer and citations identical; this test says which question moved and
in what. A change meant to alter a context or an answer rewrites the file, and its commit says why:

    python tests/test_answer_digests.py --write

The questions (auto-routed and forced local, global, DRIFT and basic) and their digests are in
`tests/data/answer_digests.json`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from fixture_paths import CAROL

DIGESTS = Path(__file__).with_name("data") / "answer_digests.json"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def answer_digests(questions: list[dict[str, str | None]]) -> list[dict[str, str | None]]:
    """Each question's engine and the digests of its context text, answer and citations, asked in order on one
    Router over the fixture index with the offline model."""
    from router import Router

    out: list[dict[str, str | None]] = []
    with Router.from_index(CAROL) as router:
        for item in questions:
            question, mode = str(item["question"]), item["mode"]
            answer = router.ask(question, mode=mode)
            context = answer.result.context_text if answer.result is not None else ""
            out.append({"question": question, "mode": mode, "engine": answer.engine,
                        "context": _digest(context), "answer": _digest(answer.text),
                        "citations": _digest(json.dumps([str(c) for c in answer.citations]))})
    return out


def test_answers_and_contexts_are_unchanged() -> None:
    expected = json.loads(DIGESTS.read_text(encoding="utf-8"))
    got = answer_digests([{"question": e["question"], "mode": e["mode"]} for e in expected])
    moved = [f"{e['question']!r} ({e['mode'] or 'auto'}): " + ", ".join(k for k in ("engine", "context", "answer", "citations")
                                                                        if e[k] != g[k])
             for e, g in zip(expected, got, strict=True) if e != g]
    assert not moved, "changed (rewrite tests/data/answer_digests.json only if meant):\n" + "\n".join(moved)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    current = json.loads(DIGESTS.read_text(encoding="utf-8"))
    DIGESTS.write_text(json.dumps(answer_digests([{"question": e["question"], "mode": e["mode"]} for e in current]),
                                  indent=1) + "\n", encoding="utf-8")
    print(f"wrote {DIGESTS}")
