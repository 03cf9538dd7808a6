"""The classifier's per-engine calibration maps and the training with two right routes (`alt` readings)."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from router.classifier import ENGINES, MODEL_PATH, Classifier, ModelFileError
from tools.routing import calibration, train
from tools.routing.examples import CLASSES


def _payload() -> dict[str, object]:
    with np.load(MODEL_PATH, allow_pickle=False) as stored:
        payload: dict[str, object] = {k: stored[k] for k in stored.files if k != "meta"}
        payload.update(json.loads(str(stored["meta"])))
    return payload


def test_the_model_file_loads_without_pickle_and_holds_only_plain_arrays() -> None:
    with np.load(MODEL_PATH, allow_pickle=False) as stored:  # raises on any pickled entry
        arrays = {k: stored[k] for k in stored.files}
    assert all(a.dtype != object for a in arrays.values())
    with zipfile.ZipFile(MODEL_PATH) as archive:  # every entry is a .npy array, nothing else
        assert all(name.endswith(".npy") for name in archive.namelist())
    assert Classifier.load().classes == list(CLASSES)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_packaged_models_calibration_is_monotone_within_zero_and_one(engine: str) -> None:
    stored = _payload().get(f"confidence_map_{engine}")
    if stored is not None:  # a model trained before the maps existed has none: the identity
        knots = np.asarray(stored)
        assert (np.diff(knots[0]) >= 0).all() and (np.diff(knots[1]) >= 0).all()
        assert knots.min() >= 0.0 and knots.max() <= 1.0
    model = Classifier.load()
    mapped = np.array([model.calibrated(engine, float(x)) for x in np.linspace(0.0, 1.0, 201)])
    assert (np.diff(mapped) >= -1e-12).all() and mapped.min() >= 0.0 and mapped.max() <= 1.0


def _held_decisions(n: int = 3000) -> train.Held:
    """Held-out decisions whose DRIFT choices are right 70 % of the time however sure, local ones as sure as said."""
    rng = np.random.default_rng(1)
    held = train.Held.empty()
    drift, local = CLASSES.index("drift"), CLASSES.index("local")
    for i in range(n):
        p = rng.uniform(0.4, 0.99)
        chosen = drift if i % 2 else local
        proba = np.full(3, (1 - p) / 2)
        proba[chosen] = p
        right = rng.uniform() < (0.7 if chosen == drift else p)
        held.add(proba, chosen, chosen, 1.0, True, False, chosen if right else 3 - chosen - 1, 1.0, 0.5)
    return held


def test_trained_calibration_maps_are_monotone_and_load_into_a_model() -> None:
    held = _held_decisions()
    conf_w, conf_b = train.fit_confidence(held)
    ceiling = train.distance_ceiling(held)
    maps = train.confidence_maps(held, conf_w, conf_b, ceiling)
    for engine, knots in maps.items():
        assert (np.diff(knots[0]) >= 0).all() and (np.diff(knots[1]) >= 0).all(), engine
        assert knots.min() >= 0.0 and knots.max() <= 1.0
    # DRIFT decisions were right 70 % of the time at every confidence: its map says so near the top
    assert float(np.interp(0.95, maps["drift"][0], maps["drift"][1])) < 0.8
    payload = _payload()
    payload.update({f"confidence_map_{e}": k for e, k in maps.items()})
    model = Classifier(payload)  # type: ignore[arg-type]
    assert model.calibrated("drift", 0.95) < 0.8


def test_a_model_file_with_a_decreasing_calibration_map_is_refused() -> None:
    payload = _payload()
    payload["confidence_map_drift"] = np.array([[0.0, 0.5, 1.0], [0.9, 0.4, 0.8]])
    with pytest.raises(ModelFileError, match="confidence_map_drift"):
        Classifier(payload)  # type: ignore[arg-type]


def _groups(n: int, name: str = "other_source") -> np.ndarray:
    return np.array([name] * n)


def test_a_fitted_map_is_non_decreasing_and_follows_held_out_accuracy() -> None:
    rng = np.random.default_rng(0)
    raw = rng.uniform(0.0, 1.0, 4000)
    correct = rng.uniform(0.0, 1.0, 4000) < 0.3 + 0.6 * raw  # true accuracy 0.3 .. 0.9
    knots = calibration.fit_map(raw, correct, np.ones(len(raw)), _groups(4000), frozenset({"other_source"}))
    assert (np.diff(knots[0]) >= 0).all() and (np.diff(knots[1]) >= 0).all()
    for x in (0.1, 0.5, 0.9):
        mapped = float(np.interp(x, knots[0], knots[1]))
        assert abs(mapped - (0.3 + 0.6 * x)) < 0.1
    # too few decisions: the raw confidence is kept
    assert np.array_equal(calibration.fit_map(raw[:5], correct[:5], np.ones(5), _groups(5), frozenset()),
                          calibration.IDENTITY)


def test_an_overconfident_engine_is_mapped_down() -> None:
    raw = np.linspace(0.8, 1.0, 500)
    correct = np.arange(500) % 10 < 7  # right 70 % of the time however sure
    knots = calibration.fit_map(raw, correct, np.ones(500), _groups(500), frozenset({"other_source"}))
    assert 0.6 < float(np.interp(0.95, knots[0], knots[1])) <= 0.7


def test_a_thin_block_claims_less_than_a_thick_one_right_as_often() -> None:
    thin = calibration.lower_bound(np.arange(10) < 9, np.ones(10))
    thick = calibration.lower_bound(np.arange(1000) < 900, np.ones(1000))
    assert thin < thick < 0.9
    # unequal weights count as fewer decisions
    skewed = np.ones(1000)
    skewed[:10] = 100.0
    assert calibration.lower_bound(np.arange(1000) >= 10, skewed) < thick


def test_the_hardest_unfamiliar_source_testing_the_engine_sets_the_map() -> None:
    raw = np.tile(np.linspace(0.8, 1.0, 200), 2)
    easy, hard = np.arange(200) % 20 != 0, np.arange(200) % 4 != 0  # right 95 % and 75 % of the time
    groups = np.array(["easy"] * 200 + ["hard"] * 200)
    knots = calibration.fit_map(raw, np.concatenate([easy, hard]), np.ones(400), groups, frozenset({"easy", "hard"}))
    assert float(np.interp(0.95, knots[0], knots[1])) == pytest.approx(0.75, abs=0.03)


def test_a_source_without_the_engines_questions_does_not_set_its_map() -> None:
    raw = np.tile(np.linspace(0.8, 1.0, 200), 2)
    right = np.arange(200) % 20 != 0  # right 95 % of the time
    groups = np.array(["tests"] * 200 + ["none"] * 200)
    correct = np.concatenate([right, np.zeros(200, dtype=bool)])  # every decision about "none" is wrong
    weight = np.concatenate([np.ones(200), np.full(200, 0.05)])  # at its source's (small) weight
    knots = calibration.fit_map(raw, correct, weight, groups, frozenset({"tests"}))
    alone = calibration.fit_map(raw[:200], right, np.ones(200), groups[:200], frozenset({"tests"}))
    top = float(np.interp(0.95, knots[0], knots[1]))
    assert 0.5 < top < float(np.interp(0.95, alone[0], alone[1]))  # it still counts in the pooled bound


def test_an_engine_no_unfamiliar_source_tests_never_claims_the_committed_band() -> None:
    raw = np.linspace(0.8, 1.0, 500)
    correct = np.ones(500, dtype=bool)  # right every time, but only on familiar (cross-validated) wording
    knots = calibration.fit_map(raw, correct, np.ones(500), _groups(500, calibration.FAMILIAR_GROUP), frozenset())
    assert float(knots[1].max()) == calibration.UNTESTED_CEILING


def test_only_unfamiliar_sources_with_enough_of_the_engines_questions_test_it() -> None:
    groups = np.array(["cv"] * 100 + ["many"] * 100 + ["few"] * 100)
    cheapest = np.array([0] * 100 + [0] * calibration.MIN_GOLD + [1] * (100 - calibration.MIN_GOLD) + [1] * 100)
    assert calibration.testing_groups(groups, cheapest, 0) == frozenset({"many"})
    assert calibration.testing_groups(groups, cheapest, 1) == frozenset({"many", "few"})


def test_a_question_with_two_right_routes_is_trained_on_both() -> None:
    drift, local = CLASSES.index("drift"), CLASSES.index("local")
    y = np.array([drift, local, local])
    alt = np.array([local, -1, drift])  # DRIFT also local; plain local; local also DRIFT
    rows, labels, weights = train.with_alt_rows(y, np.ones(3), alt, 0.25)
    assert rows.tolist() == [0, 1, 2, 0, 2]
    share = {(int(r), int(c)): float(w) for r, c, w in zip(rows, labels, weights, strict=True)}
    assert share[(0, local)] == share[(2, drift)] == pytest.approx(0.25)  # the alt reading
    assert share[(0, drift)] == share[(2, local)] == pytest.approx(0.75)  # the label
    assert share[(1, local)] == 1.0
    assert weights.sum() == pytest.approx(3.0)  # every question keeps its weight
    # with no share on the alt reading, the label alone (the default)
    rows, labels, _ = train.with_alt_rows(y, np.ones(3), alt, 0.0)
    assert rows.tolist() == [0, 1, 2] and labels.tolist() == y.tolist()


def test_the_confidence_stage_counts_the_also_right_route_as_right() -> None:
    held = train.Held.empty()
    local_proba = np.array([0.1, 0.1, 0.8])  # chooses local (CLASSES order: drift, global, local)
    held.add(local_proba, 2, 2, 1.0, True, False, CLASSES.index("drift"), 1.0, 0.5, CLASSES.index("local"))
    held.add(local_proba, 2, 2, 1.0, True, False, CLASSES.index("drift"), 1.0, 0.5)
    assert held.correct().tolist() == [True, False]


def test_an_expensive_route_where_local_was_also_right_is_not_counted_worth_its_cost() -> None:
    drift, local = CLASSES.index("drift"), CLASSES.index("local")
    held = train.Held.empty()
    drift_proba = np.array([0.8, 0.1, 0.1])  # chooses DRIFT
    held.add(drift_proba, 0, 0, 1.0, True, False, drift, 1.0, 0.5, local)  # DRIFT right, local also right
    held.add(drift_proba, 0, 0, 1.0, True, False, drift, 1.0, 0.5)  # DRIFT the only right route
    held.add(np.array([0.1, 0.1, 0.8]), 2, 2, 1.0, True, False, drift, 1.0, 0.5, local)  # local, also right
    assert held.correct().tolist() == [True, True, True]
    assert held.cheapest_right().tolist() == [False, True, True]


def test_held_out_decisions_record_what_they_were_held_out_of() -> None:
    from tools.routing.examples import Example, load_own

    own = load_own()
    picked: list[Example] = []
    for source in ("graphroute", "collections"):
        for label in CLASSES:
            picked += [e for e in own if e.source == source and e.label == label][:12]
    wf = train.fit_wording_stage(picked, folds=2)
    held = wf.held_out()
    counts = {g: held.group.count(g) for g in set(held.group)}
    # every question once cross-validated, and once decided by a model trained without its source
    assert counts == {"cv": len(picked), "graphroute": 36, "collections": 36}
    assert held.cheapest_route().tolist() == held.label  # no alt readings here: the label is the cheapest
