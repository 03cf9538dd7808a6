"""Builds the project's own labelled routing question set, `tools/routing/data/questions.jsonl`.

Run `python -m tools.routing.question_bank` to rewrite the file (deterministic, seeded).

The set has three parts, all data under `tools/routing/data/` (this module only loads and expands them):

* hand-written questions (`handwritten.jsonl`), written for this project in English and Chinese;
* source ``graphroute``: questions expanded from the templates in `bank_templates.jsonl`, filled with people,
  things, sources, aspects and events from the fourteen domains of `bank_domains.jsonl` (shared slots such as
  dates in `bank_shared.json`). Every class has templates of several shapes (wh-questions, yes/no,
  imperatives, long multi-clause questions, news-style "according to X" questions) so that no single surface
  pattern identifies a class;
* source ``collections``: questions about *collections of documents or speakers* (podcasts, interviews,
  earnings calls, meeting notes, support tickets, legal filings, news, papers, novels, lectures;
  `bank_collections.jsonl`) expanded from `bank_collection_templates.jsonl`: what a population of speakers or
  documents generally says (global), plain whole-collection overviews (global), questions about one episode,
  call or meeting of the series (local), and comparisons across named units (drift).

Label semantics (what the router should do with the question):

* ``local``  - a fact about one or a few named entities or one named document/meeting, answerable from its
  neighbourhood;
* ``global`` - about the whole corpus: themes, trends, summaries, what a population of speakers or documents
  generally says, most/least, overall patterns;
* ``drift``  - reasoning across several entities or chunks (comparison, cause and effect, how X led to Y,
  timelines, multi-hop links, scoped summaries and rewrites), but scoped to specific entities.

Every generated row records its template id (`template`, so evaluation can hold whole templates out) and the
entity strings it was filled with (`entities`, which the trainer uses to simulate index-linking signals).
"""

from __future__ import annotations

import json
import random
import re
from functools import cache
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "data"
OUTPUT = DATA_DIR / "questions.jsonl"
HANDWRITTEN = DATA_DIR / "handwritten.jsonl"
SEED = 20261129
COLLECTION_SEED = 20261201  # separate stream, so adding collection templates never changes the domain part
_SLOT = re.compile(r"\{(\w+)\}")


def _jsonl(name: str) -> list[dict[str, Any]]:
    with (DATA_DIR / name).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@cache
def shared_slots() -> dict[str, Any]:
    return dict(json.loads((DATA_DIR / "bank_shared.json").read_text(encoding="utf-8")))


def domains() -> list[dict[str, Any]]:
    return _jsonl("bank_domains.jsonl")


def templates() -> list[dict[str, Any]]:
    return _jsonl("bank_templates.jsonl")


def collections() -> list[dict[str, Any]]:
    return _jsonl("bank_collections.jsonl")


def collection_templates() -> list[dict[str, Any]]:
    return _jsonl("bank_collection_templates.jsonl")


def _base_verb(action: str) -> str:
    """Turn a past-tense phrase into its base form for 'Why did X ...' templates (good enough for our fillers)."""
    irregular: dict[str, str] = shared_slots()["irregular_verbs"]
    head, _, rest = action.partition(" ")
    if head in irregular:
        base = irregular[head]
    elif head.endswith("ied"):
        base = head[:-3] + "y"
    elif head.endswith(("ped", "ged")) and len(head) > 4 and head[-3] == head[-4]:
        base = head[:-3]
    elif head.endswith("ed") and head[:-2].endswith(("at", "os", "ac", "ng", "ov", "ir", "as", "ct", "uc", "tl")):
        base = head[:-1]
    elif head.endswith("ed"):
        base = head[:-2]
    else:
        base = head
    return f"{base} {rest}".strip()


def _fill(template: str, dom: dict[str, Any], lang: str, rng: random.Random) -> tuple[str, list[str]]:
    zh = lang == "zh"
    pre = "zh_" if zh else ""
    people = list(dom[pre + "people"])
    things = list(dom[pre + "things"])
    sources = list(dom[pre + "sources"])
    actions = list(dom[pre + "actions"])
    rng.shuffle(people)
    rng.shuffle(things)
    rng.shuffle(sources)
    rng.shuffle(actions)
    dates = list(shared_slots()["dates"][lang])
    rng.shuffle(dates)
    d1, d2 = sorted(dates[:2], key=dates.index)
    values = {
        "p": people[0], "p2": people[1], "p3": people[2],
        "t": things[0], "t2": things[1],
        "s": sources[0], "s2": sources[1],
        "a": rng.choice(dom[pre + "aspects"]),
        "act": actions[0], "act2": actions[1], "act_base": _base_verb(actions[0]),
        "c": rng.choice(dom[pre + "corpus"]),
        "topic": rng.choice(dom[pre + "topics"]),
        "k": rng.choice(dom[pre + "kinds"]),
        "d1": d1, "d2": d2,
    }
    for slot, field in (("pop", "population"), ("units", "units")):  # drawn only when used, so older
        if "{" + slot + "}" in template:  # templates keep their random stream
            values[slot] = rng.choice(dom[pre + field])
    text = template.format(**values)
    entities = [values[key] for key in ("p", "p2", "p3", "t", "t2") if "{" + key + "}" in template]
    text = text[0].upper() + text[1:] if not zh else text
    return text, entities


def _row(text: str, label: str, lang: str, domain: str, source: str, template: str,
         entities: list[str]) -> dict[str, object]:
    return {"question": text, "label": label, "lang": lang, "domain": domain, "source": source,
            "origin": "template", "template": template, "entities": entities}


def generate(rng: random.Random) -> list[dict[str, object]]:
    """Expand every domain template over several domains (each template gets a different domain sample)."""
    rows: list[dict[str, object]] = []
    doms = domains()
    for spec in templates():
        for dom in rng.sample(doms, int(spec["domains"])):
            text, entities = _fill(spec["template"], dom, spec["lang"], rng)
            rows.append(_row(text, spec["label"], spec["lang"], dom["name"], "graphroute", spec["id"], entities))
    return rows


# slots that name one specific thing of the collection (they become `entities` for simulated linking)
_NAMED_SLOTS = ("one_unit", "one_unit2", "speaker", "speaker2")


def _fill_collection(template: str, coll: dict[str, Any], lang: str, rng: random.Random) -> tuple[str, list[str]]:
    pre = "zh_" if lang == "zh" else ""
    values: dict[str, str] = {}
    for slot in dict.fromkeys(_SLOT.findall(template)):
        base = slot.rstrip("2")
        options = list(coll[pre + base])
        rng.shuffle(options)
        taken = values.get(base)
        values[slot] = next((o for o in options if o != taken), options[0])
    text = template.format(**values)
    if lang == "en":
        text = text[0].upper() + text[1:]
    return text, [values[s] for s in _NAMED_SLOTS if s in values]


def generate_collections(rng: random.Random) -> list[dict[str, object]]:
    """Expand every collection template over several kinds of collection."""
    rows: list[dict[str, object]] = []
    colls = collections()
    for spec in collection_templates():
        for coll in rng.sample(colls, int(spec["collections"])):
            text, entities = _fill_collection(spec["template"], coll, spec["lang"], rng)
            rows.append(_row(text, spec["label"], spec["lang"], coll["name"], "collections", spec["id"], entities))
    return rows


def load_handwritten(path: Path = HANDWRITTEN) -> list[dict[str, object]]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                row.setdefault("source", "graphroute")
                row.setdefault("origin", "handwritten")
                row.setdefault("entities", [])
                rows.append(row)
    return rows


def build() -> list[dict[str, object]]:
    rows = load_handwritten() + generate(random.Random(SEED)) + generate_collections(random.Random(COLLECTION_SEED))
    seen: set[str] = set()
    unique = []
    for row in rows:
        key = " ".join(str(row["question"]).lower().split())
        if key not in seen:
            seen.add(key)
            unique.append(row)
    return unique


def main() -> None:
    rows = build()
    with OUTPUT.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts: dict[tuple[str, str, str], int] = {}
    for row in rows:
        key = (str(row["source"]), str(row["label"]), str(row["lang"]))
        counts[key] = counts.get(key, 0) + 1
    print(f"wrote {len(rows)} questions to {OUTPUT}: {dict(sorted(counts.items()))}")


if __name__ == "__main__":
    main()
