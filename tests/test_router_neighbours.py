"""Distance to the training questions: the nearest-question table, the distance ceiling the trainer fits, and
the packaged model's confidence on wording in a style none of its training questions has."""

from __future__ import annotations

import math
import time

import numpy as np

from router.classifier import Classifier, classify
from router.features import extract, wording_buckets
from router.neighbours import Neighbours
from tools.routing import train


def _buckets(question: str) -> list[int]:
    f = extract(question)
    return wording_buckets(f.text, f.names)


TRAINING = ["What are the main themes of the collection?", "Who founded the harbour guild?",
            "Compare the two mayors' budgets.", "Who founded the river guild?"]


def test_a_training_question_is_its_own_nearest_and_unseen_words_pull_the_similarity_down() -> None:
    table = Neighbours.build([_buckets(q) for q in TRAINING])
    assert math.isclose(table.nearest(_buckets(TRAINING[0])), 1.0)
    near = table.nearest(_buckets("Who founded the guild?"))
    far = table.nearest(_buckets("Considering reports from two outlets, which vendor shipped the gadget?"))
    assert 0.5 < near < 1.0 and far < 0.25
    assert table.nearest([]) == 0.0 and Neighbours.build([]).nearest(_buckets(TRAINING[0])) == 0.0


def test_the_table_matches_a_brute_force_cosine() -> None:
    questions = [*TRAINING, "What did the guild's founder say about the mayors?", "风暴之后港口发生了什么变化？"]
    table = Neighbours.build([_buckets(q) for q in questions])
    sets = [set(_buckets(q)) for q in questions]
    n = len(sets)
    df = {b: sum(b in s for s in sets) for s in sets for b in s}

    def idf(b: int) -> float:
        return math.log((1 + n) / (1 + df[b])) + 1 if b in df else math.log(1 + n) + 1

    for probe in ["Who founded the mayors' guild?", "港口的变化", "What themes does the guild compare?"]:
        q = set(_buckets(probe))
        q_norm = math.sqrt(sum(idf(b) ** 2 for b in q))
        best = max(sum(idf(b) ** 2 for b in q & s) / (q_norm * math.sqrt(sum(idf(b) ** 2 for b in s)))
                   for s in sets)
        assert math.isclose(table.nearest(list(q)), best, rel_tol=1e-9)
    restored = Neighbours.from_arrays(table.arrays())
    assert math.isclose(restored.nearest(_buckets("Who founded the guild?")),
                        table.nearest(_buckets("Who founded the guild?")), rel_tol=1e-5)


def _held(rows: list[tuple[float, bool]]) -> train.Held:
    held = train.Held.empty()
    for nearest, right in rows:
        proba = np.array([0.1, 0.1, 0.8])
        held.add(proba, 2, 2, 1.0, True, False, 2 if right else 0, 1.0, nearest)
    return held


def test_the_distance_ceiling_is_the_held_out_accuracy_per_band_never_lower_for_closer_bands() -> None:
    rows = [(0.1, i < 6) for i in range(10)] + [(0.22, i < 9) for i in range(10)] + \
        [(0.27, i < 7) for i in range(10)] + [(0.6, True) for _ in range(10)]
    ceiling = train.distance_ceiling(_held(rows))
    edges = train.NEAREST_EDGES
    band = {x: int(np.searchsorted(edges, x, side="right")) for x in (0.1, 0.22, 0.27, 0.6)}
    assert math.isclose(ceiling[band[0.1]], 0.6)
    assert math.isclose(ceiling[band[0.22]], 0.9) and math.isclose(ceiling[band[0.27]], 0.9)  # never lower
    assert ceiling[-1] == 1.0 and (np.diff(ceiling) >= 0).all()
    # with-index decisions do not count (the ceiling is measured on the wording alone)
    indexed = _held(rows)
    indexed.with_index[:10] = [True] * 10
    assert train.distance_ceiling(indexed)[band[0.1]] >= 0.9


def test_the_packaged_model_is_unsure_of_wording_far_from_all_its_training_questions() -> None:
    model = Classifier.load()
    assert model.distance_ceiling(0.0) < 0.9 <= model.distance_ceiling(0.6)
    # written for this test: a long multi-clause question in a register the training questions do not use
    odd = ("Bearing in mind the dispatch filed by the Lisbon bureau and the rejoinder penned by its Oporto rival, "
           "which vintner, lauded in one for cork innovations and chided in the other for tardy shipments, is meant?")
    d = classify(odd)
    assert d.signals["nearest_training_question"] < 0.3
    assert d.confidence < 0.9


def test_the_nearest_look_up_is_fast() -> None:
    model = Classifier.load()
    question = "What do the analysts keep asking about across these calls?"
    model.predict(question)
    started = time.perf_counter()
    for _ in range(200):
        model.predict(question)
    assert (time.perf_counter() - started) / 200 < 0.005
