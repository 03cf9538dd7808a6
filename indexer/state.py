"""What the indexer keeps between runs, in `INDEX/graphroute/`. Data only: nothing here is ever unpickled.

- `manifest.json`: settings, extraction mode, embedder, documents and chunk ids of the last build,
  package versions, counts and the sha256 of every table written with it (checked at load, so a
  folder whose tables come from different builds is refused). Its presence marks a graphroute index.
- `extractions.json.gz`: per-chunk extraction results (offline mentions/pairs or the model's parsed
  entities, relationships and claims), so an incremental run only extracts new chunks. Gzipped JSON
  lines, one per chunk in chunk order after a header line, written and read as a stream
  (`ExtractionWriter`, `iter_extractions`), so a build never holds every chunk's extraction at once.
  Offline extractions are stored compactly (each sentence once per chunk, see `_compact`); other
  results as typed JSON (`indexer.jsoncodec`). The file is a series of gzip members (one a gzip reader
  reads as one stream), cut at document boundaries; `extractions.members.json` lists each member's byte
  range and chunk ids, so an update copies the members of unchanged documents as compressed bytes
  (`read_members`, `ExtractionWriter.copy_member`). A file without that list (older builds) is copied
  line by line.
- `embedder.npz`: the offline embedder (see `engines.models.embedding_offline`), read with
  `allow_pickle=False`. Fitted once per index and kept by updates (refitted only on request), so
  stored vectors stay comparable with new ones.
- `embedded.json.gz`: the sha256 of the text behind every stored vector and the embedder's
  fingerprint, so an update embeds only new or changed texts and copies the other vectors.
- `chunks.json.gz`: where each document was cut (character spans and token counts, keyed by the
  sha512 of its text), so an update tokenises only new documents.
- `model_reports.json.gz`: model-written community reports keyed by the digest of their model and
  input context, so an update asks the model only about communities whose context changed.

Files left by older versions (`extractions.pkl`, `embedder.joblib`) are never opened: they are named
in the build's warnings so the user can delete them.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import zlib
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

from indexer.config import FORMAT_VERSION, IndexerError
from indexer.jsoncodec import CodecError, decode, encode

STATE_DIR = "graphroute"
MANIFEST = "manifest.json"
EXTRACTIONS = "extractions.json.gz"
EMBEDDER = "embedder.npz"
EMBEDDED = "embedded.json.gz"
MODEL_REPORTS = "model_reports.json.gz"
CHUNK_SPANS = "chunks.json.gz"
EXTRACTION_MEMBERS = "extractions.members.json"
LEGACY_CODE_FILES = ("extractions.pkl", "embedder.joblib")  # older formats that could run code: never read
# what a build (re)writes in STATE_DIR
WRITTEN_BY_BUILD = (MANIFEST, EXTRACTIONS, EXTRACTION_MEMBERS, EMBEDDER, EMBEDDED, MODEL_REPORTS, CHUNK_SPANS)


@dataclass
class Manifest:
    settings: dict[str, Any]
    extraction: str
    embedder: dict[str, Any]
    documents: list[dict[str, str]]
    chunk_ids: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    updated: str = ""
    tables: dict[str, str] = field(default_factory=dict)  # file name -> sha256, all written together

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=2, ensure_ascii=False)


def package_versions() -> dict[str, str]:
    out = {}
    for name in ("graphroute", "graspologic-native", "jieba", "tiktoken", "lancedb", "pyarrow"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "unknown"
    return out


def read_manifest(out_dir: Path) -> Manifest | None:
    path = out_dir / STATE_DIR / MANIFEST
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Manifest(**data)
    except (OSError, ValueError, TypeError) as exc:
        raise IndexerError(f"{path}: unreadable previous manifest ({exc}); delete the folder to rebuild") from exc


def write_manifest(out_dir: Path, manifest: Manifest) -> None:
    _atomic_write(out_dir / STATE_DIR / MANIFEST, manifest.to_json().encode("utf-8"))


def table_digests(folder: Path) -> dict[str, str]:
    """sha256 of every table a build wrote in `folder` (and of its embedder), for `Manifest.tables`."""
    from shared_context.loaders.integrity import sha256_file

    files = sorted(folder.glob("*.parquet")) + sorted((folder / STATE_DIR).glob(EMBEDDER))
    return {p.relative_to(folder).as_posix(): sha256_file(p) for p in files}


def legacy_code_files(out_dir: Path) -> list[str]:
    """Older state files in a format that can execute code when loaded; they are ignored, never opened."""
    return [f"{STATE_DIR}/{n}" for n in LEGACY_CODE_FILES if (out_dir / STATE_DIR / n).exists()]


_DECODER = json.JSONDecoder()
EXTRACTIONS_FORMAT = 2  # header line {"mode", "format"}, then one [chunk_id, kind, payload] line per chunk


def iter_extractions(
    path: Path, mode: str, value_type: Any, keys: AbstractSet[str] | None = None
) -> Iterator[tuple[str, Any]]:
    """(chunk id, result) pairs stored in `path` for `mode`, in file order; nothing when the file is absent,
    of another mode or of an older format (re-extracting is always correct, only slower). `keys`: see
    `decode_extraction_line`."""
    for cid, line in iter_extraction_lines(path, mode):
        yield cid, decode_extraction_line(line, value_type, keys)


def iter_extraction_lines(path: Path, mode: str) -> Iterator[tuple[str, str]]:
    """(chunk id, raw line) pairs, undecoded: an update copies unchanged chunks' lines as they are."""
    if not path.exists():
        return
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            header = json.loads(fh.readline() or "null")
            if not isinstance(header, dict) or header.get("mode") != mode or header.get("format") != EXTRACTIONS_FORMAT:
                return
            for line in fh:
                yield _line_chunk_id(line), line
    except (OSError, EOFError, ValueError) as exc:
        raise IndexerError(f"{path}: unreadable stored extractions ({exc}); delete it to re-extract") from exc


def _loads(line: str) -> Any:
    # orjson parses these lines ~1.5x faster than `json` (the merge reads every line three times); the rare
    # line it refuses but `json` wrote (NaN or Infinity in a score) still reads as before
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def decode_extraction_line(line: str, value_type: Any, keys: AbstractSet[str] | None = None) -> Any:
    """One stored result; `CodecError` when the line does not have the shape of a `value_type`. With `keys`,
    an offline result keeps only the mentions of those keys and the pairs between two of them, and no
    lowercase counts (what the merge's later passes read; the first pass decodes and checks everything)."""
    try:
        _cid, kind, payload = _loads(line)
        if kind == "offline":
            return _uncompact(payload, keys)
        return decode(value_type, payload)
    except CodecError:
        raise
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise CodecError(f"malformed stored extraction ({exc})") from exc


def read_extractions(out_dir: Path, mode: str, value_type: Any) -> dict[str, Any]:
    """Every stored per-chunk result (each a `value_type`) for `mode`, or {} when absent or of another mode."""
    try:
        return dict(iter_extractions(out_dir / STATE_DIR / EXTRACTIONS, mode, value_type))
    except CodecError:
        return {}  # e.g. written by another extractor version: re-extracting is always correct


# A document boundary starts a new gzip member once the current one holds this much text: large enough that
# compression barely suffers from the fresh dictionary, small enough that one changed document costs little.
MEMBER_MIN_BYTES = 64 * 1024
_GZIP_WBITS = 31  # zlib's gzip container: every member a complete gzip stream


class ExtractionWriter:
    """Streams per-chunk results into `graphroute/extractions.json.gz` (a temporary name until `close`), as gzip
    members cut at `boundary()` calls, with the list of members beside it (`EXTRACTION_MEMBERS`)."""

    def __init__(self, out_dir: Path, mode: str) -> None:
        self.path = out_dir / STATE_DIR / EXTRACTIONS
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        self._members_path = self.path.with_name(EXTRACTION_MEMBERS)
        self._members_path.unlink(missing_ok=True)  # a stale list must never describe this new file
        # open across `write` calls; `close` or `abort` (or the `with` block) ends it
        self._fh = open(self._tmp, "wb")  # noqa: SIM115
        self._mode = mode
        self._members: list[tuple[int, int, list[str]]] = []  # (offset, length, chunk ids)
        self._zip: Any = None
        self._ids: list[str] = []
        self._pending = 0  # uncompressed bytes in the open member
        self._offset = 0
        self._fh.write(self._compress(json.dumps({"mode": mode, "format": EXTRACTIONS_FORMAT}).encode() + b"\n"))
        self._offset = self._fh.tell()
        self.count = 0

    @staticmethod
    def _compress(data: bytes) -> bytes:
        z = zlib.compressobj(5, zlib.DEFLATED, _GZIP_WBITS)
        return z.compress(data) + z.flush()

    def _add(self, chunk_id: str, data: bytes) -> None:
        if self._zip is None:
            self._zip = zlib.compressobj(5, zlib.DEFLATED, _GZIP_WBITS)
        self._fh.write(self._zip.compress(data))
        self._ids.append(chunk_id)
        self._pending += len(data)
        self.count += 1

    def _end_member(self) -> None:
        if self._zip is None:
            return
        self._fh.write(self._zip.flush())
        end = self._fh.tell()
        self._members.append((self._offset, end - self._offset, self._ids))
        self._zip, self._ids, self._pending, self._offset = None, [], 0, end

    def boundary(self) -> None:
        """A document ends here: start a new member if the open one is large enough."""
        if self._pending >= MEMBER_MIN_BYTES:
            self._end_member()

    def write(self, chunk_id: str, value: Any) -> None:
        if _is_offline(value):
            line = [chunk_id, "offline", _compact(value)]
        else:
            line = [chunk_id, "typed", encode(value)]
        self._add(chunk_id, (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"))

    def write_line(self, line: str, chunk_id: str | None = None) -> None:
        """A line as `iter_extraction_lines` gave it (an unchanged chunk's stored result)."""
        if chunk_id is None:
            chunk_id = _line_chunk_id(line)
        self._add(chunk_id, (line if line.endswith("\n") else line + "\n").encode("utf-8"))

    def copy_member(self, member: StoredMember) -> None:
        """A previous file's member, as its compressed bytes (every one of its chunks unchanged and kept)."""
        self._end_member()
        self._fh.write(member.data)
        end = self._fh.tell()
        self._members.append((self._offset, end - self._offset, list(member.chunk_ids)))
        self._offset = end
        self.count += len(member.chunk_ids)

    def close(self) -> None:
        if not self._fh.closed:
            self._end_member()
            self._fh.close()
            os.replace(self._tmp, self.path)
            listing = {"mode": self._mode, "size": self._offset, "members": self._members}
            _atomic_write(self._members_path, json.dumps(listing, separators=(",", ":")).encode("utf-8"))

    def abort(self) -> None:
        if not self._fh.closed:
            self._fh.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> ExtractionWriter:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


@dataclass
class StoredMember:
    """One gzip member of a stored extractions file: its compressed bytes, chunk ids and decoded lines."""

    data: bytes
    chunk_ids: list[str]
    lines: list[str]


def read_members(path: Path, mode: str) -> Iterator[StoredMember] | None:
    """The members of a stored extractions file of `mode`, each checked against its listed chunk ids; None when
    the file has no (or a stale) member list, so the caller copies it line by line. A member whose lines are not
    the chunks listed raises `IndexerError` as it is reached."""
    listing_path = path.with_name(EXTRACTION_MEMBERS)
    try:
        listing = json.loads(listing_path.read_bytes())
        members = [(int(o), int(n), [str(c) for c in ids]) for o, n, ids in listing["members"]]
        if listing["mode"] != mode or int(listing["size"]) != path.stat().st_size:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not _header_matches(path, mode):
        return None

    def members_of() -> Iterator[StoredMember]:
        with open(path, "rb") as fh:
            for offset, length, ids in members:
                fh.seek(offset)
                data = fh.read(length)
                try:
                    # split at "\n" only: JSON escapes line ends inside strings (str.splitlines also cuts at U+2028)
                    lines = [part.decode("utf-8") + "\n" for part in zlib.decompress(data, _GZIP_WBITS).split(b"\n")[:-1]]
                    found = [_line_chunk_id(line) for line in lines]
                except (zlib.error, ValueError) as exc:  # (UnicodeDecodeError is a ValueError)
                    raise IndexerError(f"{path}: unreadable stored extractions ({exc}); delete it to re-extract") from exc
                if found != ids:
                    raise IndexerError(f"{path}: its member list does not match it; delete {listing_path.name} to re-read it")
                yield StoredMember(data, ids, lines)

    return members_of()


def _header_matches(path: Path, mode: str) -> bool:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            header = json.loads(fh.readline() or "null")
    except (OSError, EOFError, ValueError):
        return False
    return isinstance(header, dict) and header.get("mode") == mode and header.get("format") == EXTRACTIONS_FORMAT


def _line_chunk_id(line: str) -> str:
    cid = _DECODER.raw_decode(line, 1)[0] if line.startswith('["') else None
    if not isinstance(cid, str):
        raise ValueError("a line without a chunk id")
    return cid


def write_extractions(out_dir: Path, mode: str, chunks: dict[str, Any]) -> None:
    with ExtractionWriter(out_dir, mode) as writer:
        for cid, value in chunks.items():
            writer.write(cid, value)


# Offline results repeat each sentence for every entity and pair it mentions: stored once per chunk,
# referenced by position, which makes the file (and the strings decoded from it) several times smaller.
_OFFLINE_FIELDS = {
    "ChunkExtraction": ("mentions", "pairs", "lowercase"),
    "Mention": ("kind", "count", "non_initial", "type_votes", "sentences", "speaker"),
    "PairStat": ("weight", "score", "sentence"),
}


def _is_offline(value: Any) -> bool:
    from indexer.extract_offline import ChunkExtraction, Mention, PairStat

    # the compact form knows these fields only: a changed dataclass falls back to typed JSON
    return isinstance(value, ChunkExtraction) and all(
        tuple(f.name for f in dataclasses.fields(cls)) == _OFFLINE_FIELDS[cls.__name__]
        for cls in (ChunkExtraction, Mention, PairStat)
    )


def _compact(ext: Any) -> dict[str, Any]:
    table: dict[str, int] = {}

    def ref(text: str) -> int:
        return table.setdefault(text, len(table))

    mentions = [
        [k, m.kind, m.count, m.non_initial, list(m.type_votes.items()), [[s, ref(t)] for s, t in m.sentences], m.speaker]
        for k, m in ext.mentions.items()
    ]
    pairs = [[a, b, p.weight, p.score, ref(p.sentence)] for (a, b), p in ext.pairs.items()]
    return {"s": list(table), "m": mentions, "p": pairs, "l": list(ext.lowercase.items())}


def _uncompact(data: dict[str, Any], keys: AbstractSet[str] | None = None) -> Any:
    from indexer.extract_offline import ChunkExtraction, Mention, PairStat

    # Type checks are written inline (`type(x) is str`) rather than through `_str`/`_int`: this runs for
    # every value of every chunk on each of the merge's three passes, and the calls were a third of it.
    texts = data["s"]
    if not all(type(t) is str for t in texts):
        raise CodecError("sentences must be strings")
    out = ChunkExtraction()
    mentions = out.mentions
    for k, kind, count, non_initial, votes, sentences, speaker in data["m"]:
        if keys is not None and k not in keys:
            continue
        if type(k) is not str or type(kind) is not str:
            raise CodecError(f"expected a string, got {type(k).__name__} / {type(kind).__name__}")
        if type(count) is not int:
            raise CodecError(f"expected an integer, got {type(count).__name__}")
        type_votes = {}
        for t, w in votes:
            if type(t) is not str:
                raise CodecError(f"expected a string, got {type(t).__name__}")
            type_votes[t] = float(w)
        picked = []
        for score, i in sentences:
            if type(i) is not int:
                raise CodecError(f"expected an integer, got {type(i).__name__}")
            picked.append((float(score), texts[i]))
        mentions[k] = Mention(kind=kind, count=count, non_initial=bool(non_initial), type_votes=type_votes,
                              sentences=picked, speaker=bool(speaker))
    pairs = out.pairs
    for a, b, weight, score, i in data["p"]:
        if keys is not None and (a not in keys or b not in keys):
            continue
        if type(a) is not str or type(b) is not str or type(i) is not int:
            raise CodecError(f"malformed pair ({type(a).__name__}, {type(b).__name__}, {type(i).__name__})")
        pairs[(a, b)] = PairStat(float(weight), float(score), texts[i])
    if keys is not None:
        return out
    lowercase = out.lowercase
    for w, n in data["l"]:
        if type(w) is not str or type(n) is not int:
            raise CodecError(f"malformed lowercase count ({type(w).__name__}, {type(n).__name__})")
        lowercase[w] = n
    return out


@dataclass
class EmbeddedTexts:
    """Which text each stored vector was computed from, and by which embedder, so an update re-embeds only
    texts that are new or changed (`embedder` is the embedder's fingerprint; `digests`: table -> id -> sha256)."""

    embedder: str
    digests: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class StoredSpans:
    """Chunk spans per document text (sha512 -> [char start, char end, tokens] per chunk) for `settings`."""

    settings: dict[str, Any]
    spans: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)


def read_reusable(out_dir: Path, name: str, kind: Any) -> Any:
    """A stored `kind` value that only saves work (embedded texts, model reports), or None when absent or
    unreadable: redoing the work is always correct."""
    path = out_dir / STATE_DIR / name
    if not path.exists():
        return None
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return decode(kind, json.load(fh))
    except (OSError, EOFError, ValueError, CodecError):
        return None


def write_reusable(out_dir: Path, name: str, value: Any) -> None:
    text = json.dumps(encode(value), ensure_ascii=False, separators=(",", ":"))
    _atomic_write(out_dir / STATE_DIR / name, gzip.compress(text.encode("utf-8"), compresslevel=5, mtime=0))


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
