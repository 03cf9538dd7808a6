"""Deterministic synthetic GraphRAG-v3 index folders for load and context-build benchmarks.

`write_synthetic_index(out_dir, n_entities)` writes the seven v3 tables as parquet:
entities, relationships (power-law degrees, ~`rels_per_entity` per entity, most edges inside the
entity's leaf community so communities are meaningful), text units (~`units_tokens` tokens, each
mentioning ~`entities_per_unit` entities by title), 2-3 community levels with parent/children,
community reports (title, summary, full_content, rank, findings), claims and documents.
The same seed always gives byte-identical tables (ids come from the seeded RNG, not uuid4).

Titles (`titles=`), the shapes entity linking meets:
- `unique`: a unique pronounceable name per entity (no two titles share a word; linking's best case);
- `realistic`: people with shared first names and surnames drawn by Zipf frequency (some with "MR"),
  organisations named after surnames with a common word (COMPANY, UNIVERSITY, GROUP, "THE ..."),
  places and events built from shared words: a few tokens occur in a large share of all titles;
- `type-word`: the entity type and a number ("PERSON 600100"), so every title shares a word with a
  quarter of the index (adversarial).

`graphrag_layout()` gives the proportions of a GraphRAG-written index (many relationships, a text unit
per five entities mentioning ~11 of them, one claim per entity, 384-dim vectors in `lancedb/` as
GraphRAG writes them: tables `entity_description`, `text_unit_text`, `community_full_content` with
columns `id` and `vector`).

    python -m benchmarks.synthetic_index --entities 10000 --out /tmp/synth10k
    python -m benchmarks.synthetic_index --entities 100000 --titles type-word --graphrag-layout --out /tmp/tw100k
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

_SYLLABLES = [
    "ka", "lo", "mi", "ra", "ven", "tor", "sel", "dan", "bri", "mor", "quel", "ast", "zen", "pha",
    "dor", "nix", "ul", "ser", "vo", "tha", "gri", "lan", "mer", "cas", "ith", "orn", "pel", "wyn",
    "ba", "jo", "ke", "ru",
]  # fmt: skip
_TYPES = ["PERSON", "ORGANIZATION", "GEO", "EVENT"]
_VERBS = [
    "works with", "reports to", "funds", "opposes", "visits", "advises", "is located in", "founded",
    "competes with", "supplies", "investigates", "trains", "protects", "negotiates with", "succeeds",
]  # fmt: skip
_WORD_TEXT = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so no what up out "
    "about who them some could him into its time than other only new then more these two may first "
    "any like now my such over our even most made after also did many before must through back years "
    "where much your way well down should because each just those people how too little state good "
    "very make world still own see men work long get here between both life being under never day "
    "same another know while last might us great old year off come since against go came right used "
    "take three council river harbour archive mission treaty signal winter market bridge valley report"
)
_WORDS = _WORD_TEXT.split()


def _name(i: int, width: int) -> str:
    """A unique pronounceable title for entity i (bijective base-32 syllable code)."""
    parts = []
    for _ in range(width):
        parts.append(_SYLLABLES[i % 32])
        i //= 32
    word = "".join(reversed(parts))
    return word[: len(word) // 2].upper() + " " + word[len(word) // 2 :].upper()


TITLE_SHAPES = ("unique", "realistic", "type-word")
_ORG_WORDS = ["COMPANY", "GROUP", "UNIVERSITY", "BANK", "INSTITUTE", "COUNCIL", "PARTNERS", "FOUNDATION"]
_GEO_FORMS = ["{}", "PORT {}", "{} RIVER", "LAKE {}", "{} VALLEY", "NEW {}"]
_EVENT_WORDS = ["WAR", "SUMMIT", "FESTIVAL", "TREATY", "ELECTION", "FLOOD", "TRIAL", "STRIKE"]


def _pool_names(rng: np.random.Generator, n: int) -> list[str]:
    """`n` distinct pronounceable words (of as few syllables as leave room for them)."""
    syllables = 2
    while 32**syllables < 4 * n:
        syllables += 1
    codes = rng.choice(32**syllables, size=n, replace=False)
    out = []
    for code in codes.tolist():
        parts = []
        for _ in range(syllables):
            parts.append(_SYLLABLES[code % 32])
            code //= 32
        out.append("".join(parts).upper())
    return out


def _zipf_pick(rng: np.random.Generator, size: int, n: int, a: float = 1.05) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1) ** a
    return rng.choice(n, size=size, p=weights / weights.sum())


def _titles(shape: str, types: list[str], seed: int) -> list[str]:
    """Unique entity titles of one shape (see the module docstring); a separate RNG stream, so the
    other tables' random draws do not depend on the shape."""
    n = len(types)
    if shape == "unique":
        width = max(3, int(np.ceil(np.log(n) / np.log(32))) + 1)
        return [_name(i * 7919 % (32**width), width) for i in range(n)]
    rng = np.random.default_rng([seed, 2])
    if shape == "type-word":
        numbers = 100_000 + rng.permutation(max(n, 900_000))[:n]
        return [f"{t} {k}" for t, k in zip(types, numbers.tolist(), strict=True)]
    if shape != "realistic":
        raise ValueError(f"unknown title shape {shape!r}; expected one of {', '.join(TITLE_SHAPES)}")
    first = _pool_names(rng, 2_000)
    last = _pool_names(rng, max(2_000, n // 20))
    words = _pool_names(rng, 5_000)
    f_pick, l_pick, w_pick = _zipf_pick(rng, n, len(first)), _zipf_pick(rng, n, len(last)), _zipf_pick(rng, n, len(words))
    form = rng.integers(0, 8, size=n).tolist()
    out: list[str] = []
    for i, (kind, f, sur, w, k) in enumerate(zip(types, f_pick.tolist(), l_pick.tolist(), w_pick.tolist(), form, strict=True)):
        if kind == "PERSON":
            title = ("MR " if k == 0 else "") + f"{first[f]} {last[sur]}"
        elif kind == "ORGANIZATION":
            title = (f"THE {words[w]} {_ORG_WORDS[k]}" if k < 2 else f"{last[sur]} {_ORG_WORDS[k]}")
        elif kind == "GEO":
            title = _GEO_FORMS[k % len(_GEO_FORMS)].format(words[w])
        else:
            title = f"{words[w]} {_EVENT_WORDS[k]} {1800 + i % 220}"
        out.append(title)
    seen: dict[str, int] = {}
    for i, title in enumerate(out):  # GraphRAG merges entities by title: titles are unique
        count = seen.get(title, 0)
        seen[title] = count + 1
        if count:
            out[i] = f"{title} {_SYLLABLES[count % 32].upper()}{count // 32 or ''}"
    assert len(set(out)) == n
    return out


def graphrag_layout() -> dict[str, Any]:
    """`write_synthetic_index` arguments for the proportions of a GraphRAG-written index."""
    return {"rels_per_entity": 5, "units_per_entity": 0.2, "entities_per_unit": 11, "claims_per_entity": 1.0,
            "vector_dim": 384, "lancedb": True}


def _uuid(rng: np.random.Generator) -> str:
    return str(uuid.UUID(bytes=rng.bytes(16), version=4))


def _sentence_pool(rng: np.random.Generator, n: int = 2000, words: int = 12) -> list[str]:
    idx = rng.integers(0, len(_WORDS), size=(n, words))
    return [" ".join(_WORDS[k] for k in row).capitalize() + "." for row in idx.tolist()]


def _group(keys: np.ndarray, values: np.ndarray, n: int) -> list[list[int]]:
    order = np.lexsort((values, keys))
    flat = values[order].tolist()
    ends = np.cumsum(np.bincount(keys, minlength=n)).tolist()
    out, start = [], 0
    for end in ends:
        out.append(flat[start:end])
        start = end
    return out


def _write(
    out: Path, name: str, columns: Mapping[str, list | np.ndarray], types: dict[str, pa.DataType]
) -> None:
    arrays = {k: pa.array(v, type=types.get(k)) for k, v in columns.items()}
    pq.write_table(pa.table(arrays), out / f"{name}.parquet")


def write_synthetic_index(
    out_dir: str | Path,
    n_entities: int,
    seed: int = 0,
    rels_per_entity: int = 5,
    units_tokens: int = 300,
    entities_per_unit: int = 10,
    levels: int = 3,
    vector_dim: int = 0,
    title_shape: str = "unique",
    units_per_entity: float = 0.3,
    claims_per_entity: float = 0.1,
    lancedb: bool = False,
) -> dict[str, int]:
    """Write a GraphRAG-v3 parquet index into `out_dir`; return the row count of each table.

    `vector_dim` > 0 also writes vectors (see `_write_vectors`): `embeddings.entity_description.parquet`
    and `embeddings.text_unit_text.parquet`, or with `lancedb` the `lancedb/` folder GraphRAG writes;
    the tables stay byte-identical."""
    if n_entities < 2:
        raise ValueError("n_entities must be at least 2")
    if not 1 <= levels <= 4:
        raise ValueError("levels must be between 1 and 4")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    pool = _sentence_pool(rng)
    n_ent = n_entities

    # ---- entities: titles, types, power-law popularity (random order so hubs are spread out)
    types = [_TYPES[t] for t in rng.integers(0, len(_TYPES), size=n_ent).tolist()]
    titles = _titles(title_shape, types, seed)
    popularity = (1.0 + rng.permutation(n_ent)) ** -0.8
    popularity /= popularity.sum()

    # ---- communities: leaves of ~20 consecutive entities, each level up merges ~6 children
    leaf_size, branching = 20, 6
    level_of_leaf = levels - 1
    comm_of_entity = {level_of_leaf: np.arange(n_ent) // leaf_size}
    for lvl in range(level_of_leaf - 1, -1, -1):
        comm_of_entity[lvl] = comm_of_entity[lvl + 1] // branching
    counts = {lvl: int(comm_of_entity[lvl].max()) + 1 for lvl in range(levels)}
    offsets, total = {}, 0
    for lvl in range(levels):  # community numbers unique across levels, roots first
        offsets[lvl] = total
        total += counts[lvl]
    number = {lvl: comm_of_entity[lvl] + offsets[lvl] for lvl in range(levels)}

    # ---- relationships: unique undirected pairs, 60% inside the source's leaf community
    n_rel_target = n_ent * rels_per_entity
    src = rng.choice(n_ent, size=int(n_rel_target * 1.5) + 16, p=popularity)
    local = rng.random(len(src)) < 0.6
    leaf_start = (src // leaf_size) * leaf_size
    leaf_len = np.minimum(leaf_size, n_ent - leaf_start)
    tgt = np.where(
        local,
        leaf_start + (rng.random(len(src)) * leaf_len).astype(np.int64),
        rng.choice(n_ent, size=len(src), p=popularity),
    )
    keep = src != tgt
    lo, hi = np.minimum(src[keep], tgt[keep]), np.maximum(src[keep], tgt[keep])
    _, first = np.unique(lo * n_ent + hi, return_index=True)
    first = np.sort(first)[:n_rel_target]
    rel_src, rel_tgt = lo[first], hi[first]
    swap = rng.random(len(rel_src)) < 0.5
    rel_src, rel_tgt = np.where(swap, rel_tgt, rel_src), np.where(swap, rel_src, rel_tgt)
    n_rel = len(rel_src)
    degree = np.bincount(np.concatenate([rel_src, rel_tgt]), minlength=n_ent)

    # ---- text units: entity mentions spread by popularity (every entity in at least one unit)
    n_units = max(1, round(n_ent * units_per_entity))
    extra = max(0, n_units * entities_per_unit - n_ent)
    link_ent = np.concatenate([np.arange(n_ent), rng.choice(n_ent, size=extra, p=popularity)])
    link_unit = rng.integers(0, n_units, size=len(link_ent))
    codes = np.unique(link_ent * n_units + link_unit)
    link_ent, link_unit = codes // n_units, codes % n_units
    entity_units = _group(link_ent, link_unit, n_ent)
    unit_entities = _group(link_unit, link_ent, n_units)
    # a relationship is found in one unit of its source entity (sometimes two)
    src_units = [entity_units[s] for s in rel_src.tolist()]
    pick = rng.random(n_rel)
    rel_units = [[u[int(p * len(u))]] for u, p in zip(src_units, pick.tolist(), strict=True)]
    second = np.flatnonzero(rng.random(n_rel) < 0.2).tolist()
    for r in second:
        extra_unit = src_units[r][int(pick[r] * 7919) % len(src_units[r])]
        if extra_unit != rel_units[r][0]:
            rel_units[r].append(extra_unit)
    rel_unit_flat = np.fromiter((u for us in rel_units for u in us), dtype=np.int64)
    rel_unit_rows = np.repeat(np.arange(n_rel), [len(us) for us in rel_units])
    unit_rels = _group(rel_unit_flat, rel_unit_rows, n_units)

    sentences_per_unit = max(1, units_tokens // 14)
    filler = rng.integers(0, len(pool), size=(n_units, sentences_per_unit)).tolist()
    verbs = rng.integers(0, len(_VERBS), size=n_units * 4).tolist()
    unit_texts = []
    for j in range(n_units):
        ents = unit_entities[j]
        mentions = [f"{titles[e]} {_VERBS[verbs[(j + k) % len(verbs)]]} {pool[filler[j][k % len(filler[j])]]}"
                    for k, e in enumerate(ents)]  # fmt: skip
        body = filler[j][len(ents) :]
        unit_texts.append(f"Part {j}. " + " ".join(mentions + [pool[s] for s in body]))
    unit_ids = [hashlib.sha512(t.encode()).hexdigest() for t in unit_texts]

    # ---- documents: 20 consecutive units each
    units_per_doc = 20
    n_docs = (n_units + units_per_doc - 1) // units_per_doc
    doc_ids = [hashlib.sha512(f"document {d} seed {seed}".encode()).hexdigest() for d in range(n_docs)]
    unit_doc = [doc_ids[j // units_per_doc] for j in range(n_units)]

    entity_ids = [_uuid(rng) for _ in range(n_ent)]
    rel_ids = [_uuid(rng) for _ in range(n_rel)]
    desc_pick = rng.integers(0, len(pool), size=(n_ent, 3)).tolist()
    entity_desc = [
        f"{titles[i]} is a {types[i].lower()} in the archive. {pool[a]} {pool[b]} {pool[c]}"
        for i, (a, b, c) in enumerate(desc_pick)
    ]
    rel_pick = rng.integers(0, len(pool), size=n_rel).tolist()
    rel_verb = rng.integers(0, len(_VERBS), size=n_rel).tolist()
    src_l, tgt_l = rel_src.tolist(), rel_tgt.tolist()
    rel_desc = [
        f"{titles[s]} {_VERBS[v]} {titles[t]}. {pool[p]}"
        for s, t, v, p in zip(src_l, tgt_l, rel_verb, rel_pick, strict=True)
    ]
    deg_l = degree.tolist()

    list_str = pa.list_(pa.string())
    _write(
        out,
        "entities",
        {
            "id": entity_ids,
            "human_readable_id": list(range(n_ent)),
            "title": titles,
            "type": types,
            "description": entity_desc,
            "text_unit_ids": [[unit_ids[u] for u in us] for us in entity_units],
            "frequency": [len(us) for us in entity_units],
            "degree": deg_l,
        },
        {"text_unit_ids": list_str, "human_readable_id": pa.int64()},
    )
    _write(
        out,
        "relationships",
        {
            "id": rel_ids,
            "human_readable_id": list(range(n_rel)),
            "source": [titles[s] for s in src_l],
            "target": [titles[t] for t in tgt_l],
            "description": rel_desc,
            "weight": rng.integers(1, 10, size=n_rel).astype(np.float64),
            "combined_degree": [deg_l[s] + deg_l[t] for s, t in zip(src_l, tgt_l, strict=True)],
            "text_unit_ids": [[unit_ids[u] for u in us] for us in rel_units],
        },
        {"text_unit_ids": list_str, "human_readable_id": pa.int64()},
    )
    _write(
        out,
        "text_units",
        {
            "id": unit_ids,
            "human_readable_id": list(range(n_units)),
            "text": unit_texts,
            "n_tokens": [units_tokens] * n_units,
            "document_id": unit_doc,
            "entity_ids": [[entity_ids[e] for e in es] for es in unit_entities],
            "relationship_ids": [[rel_ids[r] for r in rs] for rs in unit_rels],
            "covariate_ids": [[] for _ in range(n_units)],
        },
        {"entity_ids": list_str, "relationship_ids": list_str, "covariate_ids": list_str},
    )
    _write(
        out,
        "documents",
        {
            "id": doc_ids,
            "human_readable_id": list(range(n_docs)),
            "title": [f"document_{d:05d}.txt" for d in range(n_docs)],
            "text": [
                "\n\n".join(unit_texts[d * units_per_doc : (d + 1) * units_per_doc]) for d in range(n_docs)
            ],
            "text_unit_ids": [unit_ids[d * units_per_doc : (d + 1) * units_per_doc] for d in range(n_docs)],
            "creation_date": ["2026-01-01 00:00:00 +0000"] * n_docs,
        },
        {"text_unit_ids": list_str},
    )
    n_comm, n_reports = _write_communities(
        out, rng, pool, titles, entity_ids, rel_ids, unit_ids, number, levels, rel_src, rel_tgt, rel_units
    )
    n_claims = _write_claims(out, rng, pool, titles, unit_ids, entity_units, popularity, claims_per_entity)
    if vector_dim > 0:
        report_ids = pq.read_table(out / "community_reports.parquet", columns=["id"]).column("id").to_pylist()
        _write_vectors(out, seed, vector_dim, entity_ids, unit_ids, unit_entities, comm_of_entity[level_of_leaf],
                       report_ids if lancedb else None)
    return {
        "entities": n_ent,
        "relationships": n_rel,
        "text_units": n_units,
        "communities": n_comm,
        "community_reports": n_reports,
        "covariates": n_claims,
        "documents": n_docs,
    }


def _write_vectors(
    out: Path,
    seed: int,
    dim: int,
    entity_ids: list[str],
    unit_ids: list[str],
    unit_entities: list[list[int]],
    leaf_of_entity: np.ndarray,
    report_ids: list[str] | None = None,
) -> None:
    """Deterministic embeddings shaped like real ones: related records are near each other. An entity
    is its leaf community's random centre plus noise; a text unit is the mean of its entities plus
    noise. A separate RNG stream, so the other tables do not change with `dim`. With `report_ids`, the
    vectors go into `lancedb/` as GraphRAG writes them (reports get their own random vectors), else
    into `embeddings.<name>.parquet` files."""
    rng = np.random.default_rng([seed, 1])
    centres = rng.standard_normal((int(leaf_of_entity.max()) + 1, dim)).astype(np.float32)
    ent = centres[leaf_of_entity]
    ent += 0.6 * rng.standard_normal((len(entity_ids), dim)).astype(np.float32)
    units = np.zeros((len(unit_ids), dim), dtype=np.float32)
    for j, ents in enumerate(unit_entities):
        if ents:
            units[j] = ent[ents].mean(axis=0)
    units += 0.3 * rng.standard_normal(units.shape).astype(np.float32)
    tables: list[tuple[str, list[str], np.ndarray]] = [
        ("entity_description", entity_ids, ent), ("text_unit_text", unit_ids, units)
    ]
    if report_ids is None:
        for name, ids, matrix in tables:
            vectors = pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), dim)
            pq.write_table(pa.table({"id": ids, "vector": vectors}), out / f"embeddings.{name}.parquet")
        return
    tables.append(("community_full_content", report_ids, rng.standard_normal((len(report_ids), dim)).astype(np.float32)))
    import lancedb

    db = lancedb.connect(str(out / "lancedb"))
    schema = pa.schema([("id", pa.string()), ("vector", pa.list_(pa.float32(), dim))])
    for name, ids, matrix in tables:

        def batches(ids: list[str] = ids, matrix: np.ndarray = matrix) -> Any:
            step = 65_536  # a batch at a time: the Arrow copy of a million vectors is never made whole
            for lo in range(0, len(ids), step):
                flat = pa.array(np.ascontiguousarray(matrix[lo : lo + step]).reshape(-1))
                yield pa.record_batch([pa.array(ids[lo : lo + step]), pa.FixedSizeListArray.from_arrays(flat, dim)],
                                      schema=schema)

        db.create_table(name, data=pa.RecordBatchReader.from_batches(schema, batches()), mode="overwrite")


def _write_communities(
    out: Path,
    rng: np.random.Generator,
    pool: list[str],
    titles: list[str],
    entity_ids: list[str],
    rel_ids: list[str],
    unit_ids: list[str],
    number: dict[int, np.ndarray],
    levels: int,
    rel_src: np.ndarray,
    rel_tgt: np.ndarray,
    rel_units: list[list[int]],
) -> tuple[int, int]:
    rows: dict[str, list] = {k: [] for k in (
        "id", "human_readable_id", "community", "level", "parent", "children", "title",
        "entity_ids", "relationship_ids", "text_unit_ids", "period", "size",
    )}  # fmt: skip
    n_ent = len(titles)
    for lvl in range(levels):
        comm = number[lvl]
        first, n_here = int(comm.min()), int(comm.max()) - int(comm.min()) + 1
        members = _group(comm - first, np.arange(n_ent), n_here)
        inside = comm[rel_src] == comm[rel_tgt]
        rel_rows = np.flatnonzero(inside)
        rels = _group(comm[rel_src[rel_rows]] - first, rel_rows, n_here)
        parent = number[lvl - 1] if lvl > 0 else None
        child_map: list[list[int]] = [[] for _ in range(n_here)]
        if lvl + 1 < levels:
            below = number[lvl + 1]
            pairs = np.unique(np.stack([comm, below], axis=1), axis=0)
            for c, ch in pairs.tolist():
                child_map[c - first].append(ch)
        for k in range(n_here):
            ents = members[k]
            rows["id"].append(_uuid(rng))
            rows["human_readable_id"].append(first + k)
            rows["community"].append(first + k)
            rows["level"].append(lvl)
            rows["parent"].append(int(parent[ents[0]]) if parent is not None else -1)
            rows["children"].append(child_map[k])
            rows["title"].append(f"Community {first + k}")
            rows["entity_ids"].append([entity_ids[e] for e in ents])
            rows["relationship_ids"].append([rel_ids[r] for r in rels[k]])
            rows["text_unit_ids"].append(sorted({unit_ids[u] for r in rels[k] for u in rel_units[r]}))
            rows["period"].append("2026-01-01")
            rows["size"].append(len(ents))
    list_str = pa.list_(pa.string())
    _write(
        out,
        "communities",
        rows,
        {
            "children": pa.list_(pa.int64()),
            "entity_ids": list_str,
            "relationship_ids": list_str,
            "text_unit_ids": list_str,
        },
    )
    _write_reports(out, rng, pool, titles, rows, entity_ids)
    return len(rows["id"]), len(rows["id"])


def _write_reports(
    out: Path,
    rng: np.random.Generator,
    pool: list[str],
    titles: list[str],
    comm_rows: dict[str, list],
    entity_ids: list[str],
) -> None:
    pos_of = {eid: i for i, eid in enumerate(entity_ids)}
    reports: dict[str, list] = {k: [] for k in (
        "id", "human_readable_id", "community", "level", "parent", "children", "title", "summary",
        "full_content", "rank", "rating_explanation", "findings", "full_content_json", "period", "size",
    )}  # fmt: skip
    n = len(comm_rows["id"])
    ranks = np.round(rng.uniform(1.0, 9.5, size=n), 1).tolist()
    picks = rng.integers(0, len(pool), size=(n, 12)).tolist()
    for k in range(n):
        members = [titles[pos_of[e]] for e in comm_rows["entity_ids"][k][:4]]
        title = (
            f"{members[0].title()} and associates" if members else f"Community {comm_rows['community'][k]}"
        )
        p = picks[k]
        summary = f"This community centres on {', '.join(members)}. {pool[p[0]]} {pool[p[1]]}"
        findings = [
            {"summary": f"{m.title()} is central", "explanation": f"{pool[p[2 + 2 * i]]} {pool[p[3 + 2 * i]]} {pool[p[4 + i]]}"}
            for i, m in enumerate(members[:4])
        ]  # fmt: skip
        full = f"# {title}\n\n{summary}\n\n" + "\n\n".join(
            f"## {f['summary']}\n\n{f['explanation']}" for f in findings
        )
        reports["id"].append(hashlib.sha512(full.encode()).hexdigest())
        reports["human_readable_id"].append(comm_rows["community"][k])
        reports["community"].append(comm_rows["community"][k])
        reports["level"].append(comm_rows["level"][k])
        reports["parent"].append(comm_rows["parent"][k])
        reports["children"].append(comm_rows["children"][k])
        reports["title"].append(title)
        reports["summary"].append(summary)
        reports["full_content"].append(full)
        reports["rank"].append(ranks[k])
        reports["rating_explanation"].append(f"Impact rated {ranks[k]} for the size of its network.")
        reports["findings"].append(findings)
        reports["full_content_json"].append(
            json.dumps({"title": title, "summary": summary, "findings": findings, "rating": ranks[k]})
        )
        reports["period"].append("2026-01-01")
        reports["size"].append(comm_rows["size"][k])
    finding_type = pa.list_(pa.struct([("explanation", pa.string()), ("summary", pa.string())]))
    _write(out, "community_reports", reports, {"children": pa.list_(pa.int64()), "findings": finding_type})


def _write_claims(
    out: Path,
    rng: np.random.Generator,
    pool: list[str],
    titles: list[str],
    unit_ids: list[str],
    entity_units: list[list[int]],
    popularity: np.ndarray,
    claims_per_entity: float,
) -> int:
    n = max(1, round(len(titles) * claims_per_entity))
    subjects = rng.choice(len(titles), size=n, p=popularity).tolist()
    objects = rng.integers(0, len(titles), size=n).tolist()
    text = rng.integers(0, len(pool), size=n).tolist()
    statuses = ["TRUE", "FALSE", "SUSPECTED"]
    status = rng.integers(0, 3, size=n).tolist()
    units = [entity_units[s][k % len(entity_units[s])] for k, s in enumerate(subjects)]
    _write(
        out,
        "covariates",
        {
            "id": [_uuid(rng) for _ in range(n)],
            "human_readable_id": list(range(n)),
            "covariate_type": ["claim"] * n,
            "type": ["ACTIVITY"] * n,
            "description": [f"{titles[s]} was involved with {titles[o]}. {pool[t]}" for s, o, t in zip(subjects, objects, text, strict=True)],
            "subject_id": [titles[s] for s in subjects],
            "object_id": [titles[o] for o in objects],
            "status": [statuses[s] for s in status],
            "start_date": ["2026-01-01T00:00:00"] * n,
            "end_date": ["2026-02-01T00:00:00"] * n,
            "source_text": [pool[t] for t in text],
            "text_unit_id": [unit_ids[u] for u in units],
        },
        {},
    )  # fmt: skip
    return n



def ensure_synthetic_index(root: Path, n_entities: int, shape: str | None = None) -> Path:
    """`root/synthetic-N` (or with a title `shape`, `root/synthetic-<shape>-N` in the GraphRAG layout),
    generated once (seed 0) and reused while its `.complete` marker exists."""
    out = root / (f"synthetic-{n_entities}" if shape is None else f"synthetic-{shape}-{n_entities}")
    marker = out / ".complete"
    if not marker.exists():
        shutil.rmtree(out, ignore_errors=True)  # an interrupted generation
        out.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        layout = {} if shape is None else {"title_shape": shape, **graphrag_layout()}
        counts = write_synthetic_index(out, n_entities, seed=0, **layout)
        marker.write_text(json.dumps(counts))
        print(f"  generated {out} in {time.perf_counter() - started:.1f} s: {counts}", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write a synthetic GraphRAG-v3 index (parquet).")
    parser.add_argument("--entities", type=int, default=10_000)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rels-per-entity", type=int, default=5)
    parser.add_argument("--units-tokens", type=int, default=300)
    parser.add_argument("--entities-per-unit", type=int, default=10)
    parser.add_argument("--levels", type=int, default=3)
    parser.add_argument("--vector-dim", type=int, default=0, help="also write embeddings of this dimension")
    parser.add_argument("--titles", choices=TITLE_SHAPES, default="unique", help="title shape (module docstring)")
    parser.add_argument("--graphrag-layout", action="store_true",
                        help="GraphRAG's proportions and a lancedb/ folder of 384-dim vectors (overrides the counts above)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    layout: dict[str, Any] = {
        "rels_per_entity": args.rels_per_entity, "entities_per_unit": args.entities_per_unit,
        "vector_dim": args.vector_dim,
    }
    if args.graphrag_layout:
        layout.update(graphrag_layout())
    counts = write_synthetic_index(
        args.out, args.entities, seed=args.seed, units_tokens=args.units_tokens, levels=args.levels,
        title_shape=args.titles, **layout,
    )
    seconds = time.perf_counter() - start
    print(f"wrote {args.out} in {seconds:.1f}s: " + ", ".join(f"{k}={v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
