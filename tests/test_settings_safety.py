"""A downloaded GraphRAG project's settings are read safely: no secret is printed (errors, `config --show`),
a YAML alias bomb is refused quickly with a short message, and prompt files must be regular files of bounded
size inside the project (unless the user allows otherwise)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from engines.config import ConfigError
from engines.config_layers import resolve_config
from router.cli import main

SECRET = "sk-Downloaded-0123456789ABCDEF"
MODEL = """\
models:
  default_chat_model:
    type: openai_chat
    api_key: ${GRAPHRAG_API_KEY}
    model: gpt-4o-mini
    api_base: http://127.0.0.1:9/v1
"""


def _project(tmp_path: Path, extra: str = "", model: str = MODEL) -> Path:
    root = tmp_path / "project"
    (root / "output").mkdir(parents=True, exist_ok=True)
    (root / "settings.yaml").write_text(model + extra, encoding="utf-8")
    return root


# ---- 4. secrets are never printed ---------------------------------------------------------------------------

@pytest.mark.parametrize("setting", [
    "models.default_chat_model.request_timeout", "models.default_chat_model.temperature",
    "models.default_chat_model.type", "local_search.top_k_entities",
])
def test_a_secret_in_a_bad_value_is_not_echoed(tmp_path: Path, setting: str, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    section, *rest = setting.split(".")
    model = MODEL
    if section == "models":
        model = MODEL.replace("    model: gpt-4o-mini\n", f"    model: gpt-4o-mini\n    {rest[-1]}: ${{SECRET_TOKEN}}\n")
        if rest[-1] == "type":  # an unknown type is refused when no api_base says where it is served
            model = model.replace("    type: openai_chat\n", "").replace("    api_base: http://127.0.0.1:9/v1\n", "")
        extra = "local_search:\n  chat_model_id: default_chat_model\n"
    else:
        extra = f"{section}:\n  chat_model_id: default_chat_model\n  {rest[0]}: ${{SECRET_TOKEN}}\n"
    root = _project(tmp_path, extra, model)
    monkeypatch.setenv("SECRET_TOKEN", SECRET)
    monkeypatch.setenv("GRAPHRAG_API_KEY", "sk-another-key-abcdef012345")
    with pytest.raises(ConfigError) as err:
        resolve_config(None, index=root / "output")
    assert SECRET not in str(err.value) and "***" in str(err.value)
    assert main(["config", "--show", "--index", str(root / "output")]) == 2
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err and "error" in captured.err


def test_config_show_masks_service_keys_and_url_credentials(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    toml = tmp_path / "graphroute.toml"
    toml.write_text('[serve]\napi_keys = ["service-key-abcdef123"]\n\n[models.chat]\nprovider = "openai"\n'
                    'model = "gpt-4.1-mini"\napi_key = "sk-toml-key-0123456789"\n'
                    'base_url = "https://user:pass-w0rd-123@llm.example/v1?api-key=query-secret-77"\n',
                    encoding="utf-8")
    for args in (["config", "--show", "--config", str(toml)], ["config", "--config", str(toml), "--json"]):
        assert main(args) == 0
        out = capsys.readouterr().out
        for secret in ("service-key-abcdef123", "sk-toml-key-0123456789", "pass-w0rd-123", "query-secret-77"):
            assert secret not in out
        assert "llm.example/v1" in out and "(set)" in out


# ---- 5. a YAML alias bomb ----------------------------------------------------------------------------------

def test_a_yaml_alias_bomb_is_refused_quickly_with_a_short_message(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        levels.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 10) + "]")
    bomb = "\n".join(levels) + "\nlocal_search: *i\n"
    assert len(bomb) < 600
    root = _project(tmp_path, model=bomb)
    started = time.perf_counter()
    assert main(["config", "--show", "--index", str(root / "output")]) == 2
    assert time.perf_counter() - started < 2.0
    err = capsys.readouterr().err
    assert "alias" in err and len(err) < 2_000


# ---- 6. prompt files: regular, bounded, inside the project ---------------------------------------------------

def _with_prompt(tmp_path: Path, path: str) -> Path:
    return _project(tmp_path, f"local_search:\n  chat_model_id: default_chat_model\n  prompt: {path}\n")


def _refused(root: Path, match: str, **kw: bool) -> None:
    with pytest.raises(ConfigError, match=match):
        resolve_config(None, index=root / "output", env={"GRAPHRAG_API_KEY": "k" * 8}, **kw)


def test_prompt_devices_and_fifos_are_refused_without_reading(tmp_path: Path) -> None:
    _refused(_with_prompt(tmp_path, "/dev/zero"), "not a regular file", allow_prompt_outside=True)
    fifo = tmp_path / "project" / "prompt.fifo"
    root = _with_prompt(tmp_path, "prompt.fifo")
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            resolve_config(None, index=root / "output", env={"GRAPHRAG_API_KEY": "k" * 8})
            outcome.append(None)
        except ConfigError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # unblock the reader so the test process can end, then fail
        with open(fifo, "w"):
            pass
        pytest.fail("reading a FIFO prompt blocked")
    assert outcome and "not a regular file" in str(outcome[0])


def test_a_large_prompt_is_refused_by_its_first_bytes(tmp_path: Path) -> None:
    root = _with_prompt(tmp_path, "big.txt")
    with open(root / "big.txt", "wb") as f:
        f.truncate(50 * 1024 * 1024 * 1024)  # 50 GB, sparse: read whole it would not fit in memory
    _refused(root, "over 800,000 bytes")


def test_a_prompt_outside_the_project_needs_the_users_consent(tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("Answer as {response_type}. {context_data}", encoding="utf-8")
    root = _with_prompt(tmp_path, "../elsewhere.txt")
    _refused(root, "outside the folder of the settings")
    resolve_config(None, index=root / "output", env={"GRAPHRAG_API_KEY": "k" * 8}, allow_prompt_outside=True)
    absolute = _with_prompt(tmp_path / "again", str(secret))
    _refused(absolute, "outside the folder of the settings")
    # the user's own graphroute.toml may name an absolute path; a relative one stays in its folder
    toml = tmp_path / "conf" / "graphroute.toml"
    toml.parent.mkdir()
    toml.write_text(f'[local]\nprompt = "{secret}"\n', encoding="utf-8")
    assert resolve_config(toml, env={}).config.local.prompt is not None
    toml.write_text('[local]\nprompt = "../elsewhere.txt"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="outside the folder"):
        resolve_config(toml, env={})
