"""The offline indexer types an entity from cues in the text beside it (`indexer/data/type_cues.txt`), not the
default PERSON of any capitalised two-word name: places, vessels, objects and organisations of a small test
set of invented sentences."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.pipeline import build_index
from shared_context import load_index

TEXT = """\
# Notes from the coast

The schooner Marigold Vane left Tarrow Bay at dawn. The Marigold Vane carried lamp oil north.
Later the schooner Marigold Vane came back with the mail.

Keepers of the Corran Head lighthouse trimmed the wicks each night. Storms battered Corran Head lighthouse
every winter. Corran Head Lighthouse was rebuilt in stone.

HMS Resolute anchored off the reef. The crew of HMS Resolute rowed ashore with the stores.

Harlan Brothers, a lens maker of Glasgow, ground the great lens. Harlan Brothers shipped it north by rail.
The keepers wrote to Harlan Brothers when the lens cracked.

Grey Warden, a brass clock by the same makers, hung in the watch room. The keepers wound Grey Warden daily.
Grey Warden stopped during the great storm.

The steamer Lady Orla brought the relief keepers. Lady Orla left again before the fog came down.
Skellan Rock lies two miles west; the keepers fished off Skellan Rock in calm weather.
The keepers called the brass telescope by the window Argus Vane. Argus Vane, a brass telescope, showed every
sail. Through Argus Vane the keepers watched the ships.
Marlow Foundry cast the new lantern frame. Marlow Foundry sent two men to fit it.

Elsie Varga kept the log. Elsie Varga said the storm lasted three days. Later Elsie Varga moved inland.
"""

EXPECTED = {
    "MARIGOLD VANE": "VESSEL",
    "CORRAN HEAD": "GEO",
    "HMS RESOLUTE": "VESSEL",
    "HARLAN BROTHERS": "ORGANIZATION",
    "GREY WARDEN": "OBJECT",
    "ELSIE VARGA": "PERSON",
    "LADY ORLA": "VESSEL",
    "SKELLAN ROCK": "GEO",
    "ARGUS VANE": "OBJECT",
    "MARLOW FOUNDRY": "ORGANIZATION",
}


@pytest.fixture(scope="module")
def types(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("coast")
    (root / "docs").mkdir()
    (root / "docs" / "coast.md").write_text(TEXT, encoding="utf-8")
    build_index(root / "docs", root / "index", progress=False)
    return {e.title: e.type for e in load_index(root / "index").entities}


@pytest.mark.parametrize(("title", "kind"), sorted(EXPECTED.items()))
def test_types_come_from_the_cues_beside_the_name(types: dict[str, str], title: str, kind: str) -> None:
    found = {t: k for t, k in types.items() if t == title or t.startswith(title + " ")}
    assert found, f"{title} not extracted ({sorted(types)})"
    assert all(k == kind for k in found.values()), found


def test_cue_lexicons_are_data() -> None:
    from indexer import lexicon

    assert lexicon.type_noun("schooner") == "VESSEL" and lexicon.type_noun("lighthouse") == "GEO"
    assert lexicon.type_noun("telescope") == "OBJECT" and lexicon.type_noun("maker") == "ORGANIZATION"
    assert lexicon.type_noun("quickly") is None and lexicon.type_noun("server") is None  # listed nouns only
    assert Path(lexicon.DATA_DIR / "type_cues.txt").is_file()
