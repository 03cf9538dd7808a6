"""An index on object storage (`s3://`), read from a real S3-compatible server the test starts (moto's server,
from PyPI) with credentials from the standard `AWS_*` environment variables: the parquet tables and the
LanceDB vectors arrive as they are on disk, two replicas (cache folders of their own) open the same index,
and a missing bucket or a denied read is a clear error naming the location."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from small_index import build_small_index

from shared_context import IndexFormatError, load_index
from testing.processes import S3Server

BUCKET = "graphroute-indexes"
PREFIX = "harbour/output"


@dataclass
class Store:
    server: S3Server
    local: Path  # the index as built, for comparison
    full: tuple[str, str]  # access key, secret: may read everything
    list_only: tuple[str, str]  # may list the bucket, not read its objects


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    import boto3

    local = build_small_index(tmp_path_factory.mktemp("s3"))
    files = _files(local)
    # moto checks credentials after the first N requests: the bucket, the uploads and the two users' set-up
    setup_requests = 1 + len(files) + 2 * 3
    with S3Server({"INITIAL_NO_AUTH_ACTION_COUNT": str(setup_requests)}) as server:
        kw = {"endpoint_url": server.url, "region_name": "us-east-1", "aws_access_key_id": "setup",
              "aws_secret_access_key": "setup"}
        s3, iam = boto3.client("s3", **kw), boto3.client("iam", **kw)
        s3.create_bucket(Bucket=BUCKET)
        for path in files:
            s3.upload_file(str(path), BUCKET, f"{PREFIX}/{path.relative_to(local).as_posix()}")
        keys = []
        for user, actions in (("replica", ["s3:*"]), ("lister", ["s3:ListBucket"])):
            iam.create_user(UserName=user)
            key = iam.create_access_key(UserName=user)["AccessKey"]
            iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps({
                "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}))
            keys.append((key["AccessKeyId"], key["SecretAccessKey"]))
        yield Store(server, local, keys[0], keys[1])


def _credentials(monkeypatch: pytest.MonkeyPatch, store: Store, key: tuple[str, str], cache: Path) -> None:
    """The standard variables every AWS client reads, and a cache folder: one replica host's environment."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key[1])
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", store.server.url)
    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(cache))


def test_two_replicas_open_the_same_index_from_s3_lancedb_vectors_included(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert (store.local / "lancedb").is_dir()
    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(tmp_path / "local"))
    local = load_index(store.local)
    opened = []
    for replica in ("a", "b"):
        _credentials(monkeypatch, store, store.full, tmp_path / f"replica-{replica}")
        opened.append(load_index(f"s3://{BUCKET}/{PREFIX}"))
    for index in opened:
        assert len(index.entities) == len(local.entities) > 0
        assert [e.title for e in index.entities] == [e.title for e in local.entities]
        assert len(index.text_units) == len(local.text_units)
        assert sorted(index.vectors) == sorted(local.vectors) and index.vectors  # the LanceDB tables
        for name, table in local.vectors.items():
            assert np.allclose(np.asarray(index.vectors[name].matrix), np.asarray(table.matrix))
    mirrored = tmp_path / "replica-b" / "remote"
    assert any(mirrored.rglob("*.lance")) or any(p.name == "lancedb" for p in mirrored.rglob("*"))


def test_a_missing_bucket_is_named(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _credentials(monkeypatch, store, store.full, tmp_path)
    with pytest.raises(IndexFormatError) as err:
        load_index(f"s3://no-such-bucket-here/{PREFIX}")
    assert "s3://no-such-bucket-here" in str(err.value)
    assert "does not exist" in str(err.value) or "NoSuchBucket" in str(err.value)


def test_a_denied_read_is_named(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _credentials(monkeypatch, store, store.list_only, tmp_path)
    with pytest.raises(IndexFormatError) as err:
        load_index(f"s3://{BUCKET}/{PREFIX}")
    message = str(err.value)
    assert f"s3://{BUCKET}/{PREFIX}" in message and "ACCESS_DENIED" in message  # which location, and why
