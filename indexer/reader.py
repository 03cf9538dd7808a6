"""Read the input folder into documents, saying for every file what happened to it.

Formats: `.txt`, `.md` (encoding detected, see `indexer.decode`), `.html`, `.pdf`, `.docx`
(`indexer.formats`), and `.csv`, `.jsonl`, `.parquet` with one document per row (`indexer.tabular`,
`ColumnOptions`). Binary files are refused with the reason; symbolic links, to files or folders, that
lead outside the input folder are skipped (a link `docs/passwd.txt -> /etc/passwd` must not become a
document); links inside it are read once, through their real path. Hidden files are ignored.

Documents are read in sorted relative-path order so ids, table order and chunking are deterministic.
The document id is the sha512 hex of the text, as in GraphRAG's input reader (or the `--id-column`
value for table rows); the title is the path relative to the input folder (POSIX separators).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from indexer.config import IndexerError
from indexer.decode import NotText, decode_text
from indexer.formats import docx_to_text, html_to_text, pdf_to_text
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


def read_documents(input_dir: str | Path, columns: ColumnOptions | None = None) -> tuple[list[SourceDocument], list[str]]:
    """Return (documents, skipped file messages). Raises `IndexerError` for a missing/empty folder."""
    result = read_input(input_dir, columns)
    return result.documents, result.skipped


def read_input(input_dir: str | Path, columns: ColumnOptions | None = None) -> ReadResult:
    root = Path(input_dir)
    if not root.exists():
        raise IndexerError(f"input folder {root} does not exist")
    if not root.is_dir():
        raise IndexerError(f"input {root} is not a folder")
    options = columns or ColumnOptions()
    result = ReadResult()
    seen_ids: dict[str, str] = {}
    for rel, path in _walk(root, result.skipped):
        for doc in _read_file(path, rel, options, result):
            if doc.id in seen_ids:
                result.skipped.append(f"{doc.title}: same {'id' if doc.explicit_id else 'text'} as {seen_ids[doc.id]}")
                continue
            seen_ids[doc.id] = doc.title
            result.documents.append(doc)
    if not result.documents:
        why = "; ".join(result.skipped) if result.skipped else "the folder has no files"
        raise IndexerError(f"no readable documents in {root} ({why}); supported: {' '.join(SUPPORTED)}")
    return result


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
    if not text.strip():
        result.skipped.append(f"{rel}: no text" + (" (a scanned PDF has no text layer)" if suffix == ".pdf" else ""))
        return []
    return [SourceDocument(title=rel, text=text, creation_date=created)]


def _read_table_file(
    path: Path, rel: str, suffix: str, options: ColumnOptions, created: str, result: ReadResult
) -> list[SourceDocument]:
    table, encoding = read_rows(path, suffix)
    result.encodings[rel] = encoding
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
        raise TableInputError(f"no rows with text in column {options.text!r}")
    return docs
