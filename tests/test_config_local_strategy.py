"""Every local-context parameter, including the text-unit strategy, is settable from graphroute.toml."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engines import LocalSearch, load_config
from engines.models.errors import ModelConfigError
from engines.models.offline import OfflineChatModel


def test_strategy_from_toml_reaches_the_builder(tmp_path: Path, dulce_path: Path) -> None:
    cfg_file = tmp_path / "graphroute.toml"
    cfg_file.write_text('[local]\ntext_unit_strategy = "min_guarantee"\nmin_units_per_entity = 2\n'
                        'max_context_tokens = 3000\n')
    cfg = load_config(cfg_file, env={})
    assert cfg.local.text_unit_strategy == "min_guarantee"

    from shared_context import load_index

    index = load_index(dulce_path)
    engine = LocalSearch(index, OfflineChatModel(), config=cfg)
    result = asyncio.run(engine.search("Who is Agent Alex Mercer?"))
    assert result.usage.total.llm_calls == 1
    assert result.context_text and index.tokenizer.count(result.context_text) <= 3000


def test_unknown_strategy_names_the_key(tmp_path: Path) -> None:
    cfg_file = tmp_path / "graphroute.toml"
    cfg_file.write_text('[local]\ntext_unit_strategy = "best"\n')
    with pytest.raises(ModelConfigError, match=r"local\.text_unit_strategy"):
        load_config(cfg_file, env={})
