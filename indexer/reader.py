"""Read the input folder: `.txt` and `.md` natively, PDF/DOCX only when their parser is installed.

Documents are read in sorted relative-path order so ids, table order and chunking are deterministic.
The document id is the sha512 hex of the text, as in GraphRAG's input reader; the title is the path
relative to the input folder (POSIX separators).
"""

from __future__ import annotations

import hashlib
import importlib.util
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from indexer.config import IndexerError

TEXT_SUFFIXES = {".txt", ".md", ".markdown"}
# suffix -> (import name, pip extra that provides it)
OPTIONAL_SUFFIXES = {".pdf": ("pypdf", "pypdf"), ".docx": ("docx", "python-docx")}


@dataclass(frozen=True)
class SourceDocument:
    title: str
    text: str
    creation_date: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return sha512_hex(self.text)


def sha512_hex(text: str) -> str:
    return hashlib.sha512(text.encode("utf-8")).hexdigest()


def _read_pdf(path: Path) -> str:
    import pypdf

    reader = pypdf.PdfReader(str(path))
    return "\n\n".join((page.extract_text() or "") for page in reader.pages)


def _read_docx(path: Path) -> str:
    import docx

    return "\n".join(p.text for p in docx.Document(str(path)).paragraphs)


def _decode(path: Path) -> str:
    raw = path.read_bytes()
    for encoding in ("utf-8-sig", "utf-16"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    # Last resort keeps the file rather than failing the whole build; bad bytes become U+FFFD.
    warnings.warn(f"{path}: not valid UTF-8; undecodable bytes were replaced", stacklevel=3)
    return raw.decode("utf-8", errors="replace")


def read_documents(input_dir: str | Path) -> tuple[list[SourceDocument], list[str]]:
    """Return (documents, skipped file messages). Raises `IndexerError` for a missing/empty folder."""
    root = Path(input_dir)
    if not root.exists():
        raise IndexerError(f"input folder {root} does not exist")
    if not root.is_dir():
        raise IndexerError(f"input {root} is not a folder")
    documents: list[SourceDocument] = []
    skipped: list[str] = []
    seen_ids: dict[str, str] = {}
    paths = sorted(
        (p for p in root.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)),
        key=lambda p: p.relative_to(root).as_posix(),
    )
    for path in paths:
        rel = path.relative_to(root).as_posix()
        suffix = path.suffix.lower()
        try:
            if suffix in TEXT_SUFFIXES:
                text = _decode(path)
            elif suffix in OPTIONAL_SUFFIXES:
                module, extra = OPTIONAL_SUFFIXES[suffix]
                if importlib.util.find_spec(module) is None:
                    msg = f"{rel}: {suffix} files need the optional '{extra}' package (pip install {extra})"
                    warnings.warn(msg, stacklevel=2)
                    skipped.append(msg)
                    continue
                try:
                    text = _read_pdf(path) if suffix == ".pdf" else _read_docx(path)
                except Exception as exc:  # parser libraries raise their own types for broken files
                    msg = f"{rel}: could not be parsed ({type(exc).__name__}: {exc})"
                    warnings.warn(msg, stacklevel=2)
                    skipped.append(msg)
                    continue
            else:
                msg = f"{rel}: unsupported file type {suffix or '(none)'}; only .txt and .md are read"
                warnings.warn(msg, stacklevel=2)
                skipped.append(msg)
                continue
        except OSError as exc:
            msg = f"{rel}: could not be read ({exc})"
            warnings.warn(msg, stacklevel=2)
            skipped.append(msg)
            continue
        if not text.strip():
            skipped.append(f"{rel}: empty")
            continue
        doc = SourceDocument(
            title=rel,
            text=text,
            creation_date=datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).isoformat(timespec="seconds"),
        )
        if doc.id in seen_ids:
            skipped.append(f"{rel}: same text as {seen_ids[doc.id]}")
            continue
        seen_ids[doc.id] = rel
        documents.append(doc)
    if not documents:
        raise IndexerError(f"no readable .txt or .md documents in {root}")
    return documents, skipped
