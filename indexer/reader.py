"""Read the input (a folder, one file, or a glob) into documents, saying for every file what happened to it.

Formats: `.txt`, `.md` (encoding detected, see `indexer.decode`), `.html`, `.pdf`, `.docx`
(`indexer.formats`), and `.csv`, `.jsonl`, `.parquet` with one document per row (`indexer.tabular`,
`ColumnOptions`). Binary files are refused with the reason; symbolic links, to files or folders, that
lead outside the input folder are skipped (a link `docs/passwd.txt -> /etc/passwd` must not become a
document); links inside it are read once, through their real path. Hidden files are ignored.

The input is a folder (read recursively), a single file, or a glob pattern (`docs/**/*.md`; `**` crosses
folders); several inputs may be given. Titles are paths relative to the folder the input names: the folder
itself, a file's own folder, or the part of a glob before its first wildcard. A glob's matches get the same
link rule as a folder's files; a file named outright is read wherever it leads.

Documents are read in sorted relative-path order so ids, table order and chunking are deterministic.
The document id is the sha512 hex of the text, as in GraphRAG's input reader (or the `--id-column`
value for table rows); the title is the path relative to the input folder (POSIX separators).
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from indexer.config import IndexerError
from indexer.decode import NotText, decode_text
from indexer.formats import docx_to_text, html_to_text, pdf_to_text
from indexer.front_matter import file_attributes, split_front_matter
from indexer.tabular import TABLE_SUFFIXES, ColumnOptions, TableInputError, read_rows, table_documents

TEXT_SUFFIXES = {".txt", ".md", ".markdown"}
RICH_SUFFIXES = {".html", ".htm", ".pdf", ".docx"}
SUPPORTED = sorted(TEXT_SUFFIXES | RICH_SUFFIXES | TABLE_SUFFIXES)


@dataclass(frozen=True)
class SourceDocument:
    title: str
    text: str
    creation_date: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)  # table rows' other columns (GraphRAG attributes)
    explicit_id: str = ""  # from --id-column; else the text's hash

    @cached_property
    def id(self) -> str:
        # cached: hashing a 50 MB text once per chunk made chunking quadratic
        return self.explicit_id or sha512_hex(self.text)


def sha512_hex(text: str) -> str:
    return hashlib.sha512(text.encode("utf-8")).hexdigest()


@dataclass
class ReadResult:
    documents: list[SourceDocument] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "<file>: <why>" for every file not indexed
    encodings: dict[str, str] = field(default_factory=dict)  # file -> how it was decoded
    notes: list[str] = field(default_factory=list)  # parser warnings and partial skips


Inputs = str | Path | Sequence[str | Path]


def read_documents(inputs: Inputs, columns: ColumnOptions | None = None) -> tuple[list[SourceDocument], list[str]]:
    """Return (documents, skipped file messages). Raises `IndexerError` for a missing/empty input."""
    result = read_input(inputs, columns)
    return result.documents, result.skipped


def read_input(inputs: Inputs, columns: ColumnOptions | None = None) -> ReadResult:
    """Read a folder, a file, a glob pattern, or several of them. A table file named on its own whose text
    column is missing is an error listing its columns (in a folder it is skipped with that reason)."""
    given = [inputs] if isinstance(inputs, str | Path) else list(inputs)
    if not given:
        raise IndexerError("no input given: name a folder, a file or a glob pattern")
    options = columns or ColumnOptions()
    result = ReadResult()
    files = _input_files(given, result.skipped)
    seen_ids: dict[str, str] = {}
    lone_table = len(files) == 1 and len(given) == 1 and Path(given[0]).is_file()
    for rel, path in files:
        if lone_table and path.suffix.lower() in TABLE_SUFFIXES:
            docs = _read_lone_table(path, rel, options, result)
        else:
            docs = _read_file(path, rel, options, result)
        for doc in docs:
            if doc.id in seen_ids:
                result.skipped.append(f"{doc.title}: same {'id' if doc.explicit_id else 'text'} as {seen_ids[doc.id]}")
                continue
            seen_ids[doc.id] = doc.title
            result.documents.append(doc)
    if not result.documents:
        where = ", ".join(str(g) for g in given)
        why = "; ".join(result.skipped) if result.skipped else "no files"
        raise IndexerError(f"no readable documents in {where} ({why}); supported: {' '.join(SUPPORTED)}")
    return result


def _input_files(given: list[str | Path], skipped: list[str]) -> list[tuple[str, Path]]:
    """(title path, real path) of every file the inputs name, sorted by title, each file once."""
    found: dict[str, Path] = {}
    for item in given:
        path = Path(item)
        if path.is_dir():
            entries = _walk(path, skipped)
        elif path.is_file():
            entries = [(path.name, path)]
        elif _is_glob(str(item)):
            entries = _glob(str(item), skipped)
        elif path.exists():
            raise IndexerError(f"input {path} is neither a folder nor a regular file")
        else:
            raise IndexerError(f"input {path} does not exist")
        for rel, real in entries:
            found.setdefault(rel, real)
    return sorted(found.items())


def _is_glob(text: str) -> bool:
    return any(c in text for c in "*?[")


def _glob(pattern: str, skipped: list[str]) -> list[tuple[str, Path]]:
    """The files a glob matches (folders it matches are read whole), titled relative to its fixed prefix."""
    parts = Path(pattern).parts
    fixed = [p for p in parts[: next(i for i, p in enumerate(parts) if _is_glob(p))]]
    base = Path(*fixed) if fixed else Path(".")
    real_base = base.resolve()
    out: list[tuple[str, Path]] = []
    matches = sorted(glob.glob(pattern, recursive=True))
    if not matches:
        raise IndexerError(f"the pattern {pattern} matches no file")
    for match in matches:
        path = Path(match)
        rel = path.relative_to(base).as_posix() if path.is_relative_to(base) else path.name
        if path.is_dir():
            out.extend((f"{rel}/{sub}", real) for sub, real in _walk(path, skipped))
            continue
        if path.is_symlink():
            if not _inside(path, real_base):
                skipped.append(f"{rel}: symbolic link to a file outside {base}; not read")
                continue
            path = path.resolve()
        if not path.is_file():
            skipped.append(f"{rel}: not a regular file")
            continue
        out.append((rel, path))
    return out


def _walk(root: Path, skipped: list[str]) -> list[tuple[str, Path]]:
    """(relative name, real path) of every regular file to read, sorted; unsafe links reported in `skipped`."""
    real_root = root.resolve()
    found: list[tuple[str, Path]] = []
    for folder, dirs, files in os.walk(root):  # does not follow links to folders
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in [d for d in dirs if (here / d).is_symlink()]:
            dirs.remove(name)
            rel = (here / name).relative_to(root).as_posix()
            if not _inside(here / name, real_root):
                skipped.append(f"{rel}/: symbolic link to a folder outside the input folder; not followed")
            # a link to a folder inside the input is read through its real path already
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = here / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                if not _inside(path, real_root):
                    skipped.append(f"{rel}: symbolic link to a file outside the input folder; not read")
                    continue
                path = path.resolve()
            if not path.is_file():
                skipped.append(f"{rel}: not a regular file")
                continue
            found.append((rel, path))
    return sorted(found, key=lambda item: item[0])


def _inside(link: Path, real_root: Path) -> bool:
    try:
        return link.resolve().is_relative_to(real_root)
    except (OSError, RuntimeError):  # a link loop
        return False


def _read_file(path: Path, rel: str, options: ColumnOptions, result: ReadResult) -> list[SourceDocument]:
    suffix = path.suffix.lower()
    if suffix not in TEXT_SUFFIXES | RICH_SUFFIXES | TABLE_SUFFIXES:
        result.skipped.append(f"{rel}: unsupported file type {suffix or '(none)'} (supported: {' '.join(SUPPORTED)})")
        return []
    try:
        created = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).isoformat(timespec="seconds")
        if suffix in TABLE_SUFFIXES:
            return _read_table_file(path, rel, suffix, options, created, result)
        if suffix in (".pdf", ".docx"):
            text, parser_notes = pdf_to_text(path) if suffix == ".pdf" else docx_to_text(path)
            result.encodings[rel] = suffix[1:]
            result.notes.extend(f"{rel}: {n}" for n in parser_notes)
        else:
            text, encoding = decode_text(path.read_bytes())
            result.encodings[rel] = encoding
            if suffix in (".html", ".htm"):
                text = html_to_text(text)
    except NotText as exc:
        result.skipped.append(f"{rel}: refused, {exc}")
        return []
    except TableInputError as exc:
        result.skipped.append(f"{rel}: {exc}")
        return []
    except OSError as exc:
        result.skipped.append(f"{rel}: could not be read ({exc.strerror or exc})")
        return []
    except Exception as exc:  # parser libraries raise their own types for broken files
        result.skipped.append(f"{rel}: could not be parsed ({type(exc).__name__}: {exc})")
        return []
    meta = file_attributes(rel, suffix, created)
    if suffix in TEXT_SUFFIXES:
        front, text, note = split_front_matter(text)
        meta.update(front)
        if note:
            result.notes.append(f"{rel}: {note}")
    if not text.strip():
        result.skipped.append(f"{rel}: no text" + (" (a scanned PDF has no text layer)" if suffix == ".pdf" else ""))
        return []
    return [SourceDocument(title=rel, text=text, creation_date=created, metadata=meta)]


def _read_lone_table(path: Path, rel: str, options: ColumnOptions, result: ReadResult) -> list[SourceDocument]:
    """A table file given on its own: a missing text column (or an unreadable table) is an error that
    lists the columns, since no other file can give documents instead."""
    try:
        created = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).isoformat(timespec="seconds")
        return _read_table_file(path, rel, path.suffix.lower(), options, created, result)
    except TableInputError as exc:
        raise IndexerError(f"{rel}: {exc}") from None
    except OSError as exc:
        raise IndexerError(f"{rel}: could not be read ({exc.strerror or exc})") from None


def _read_table_file(
    path: Path, rel: str, suffix: str, options: ColumnOptions, created: str, result: ReadResult
) -> list[SourceDocument]:
    table = read_rows(path, suffix)
    result.encodings[rel] = table.how
    rows, notes = table_documents(table, rel, options)
    result.notes.extend(notes)
    docs = []
    for row in rows:
        attributes = row["attributes"]
        explicit = ""
        if options.id is not None:
            explicit = str(attributes.get(options.id) or "")
            if not explicit:
                result.notes.append(f"{row['title']}: empty {options.id!r}; the text's hash is its id")
        docs.append(SourceDocument(row["title"], row["text"], created, attributes, explicit))
    if not docs:
        why = f" ({notes[0].removeprefix(rel + ': ')})" if notes else ""
        raise TableInputError(f"no rows with text in column {options.text!r}{why}")
    return docs
