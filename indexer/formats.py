"""Text out of rich documents: HTML (`indexer.html_text`: the reading text, without navigation and page
furniture), PDF (pypdf), DOCX (python-docx).

Structure that helps chunking is kept as lines: headings and paragraphs on their own lines, list items
as "- item", table rows as cells joined by " | ". Parsers' own warnings are captured and returned with
the text instead of being printed, so the build summary is the one place that reports them.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from indexer.html_text import html_to_text, join_lines

__all__ = ["docx_to_text", "html_to_text", "pdf_to_text"]

def pdf_to_text(path: Path) -> tuple[str, list[str]]:
    import pypdf

    with warnings.catch_warnings(record=True) as caught, _captured_log("pypdf") as logged:
        warnings.simplefilter("always")
        reader = pypdf.PdfReader(str(path))
        if reader.is_encrypted:
            raise ValueError("the PDF is encrypted")
        pages = [page.extract_text() or "" for page in reader.pages]
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    return text, [str(w.message) for w in caught] + logged


@contextmanager
def _captured_log(name: str) -> Iterator[list[str]]:
    """Collect a library logger's warnings (pypdf logs, it does not warn) instead of printing them."""
    messages: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    logger = logging.getLogger(name)
    handler, propagate = _Collect(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def docx_to_text(path: Path) -> tuple[str, list[str]]:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        document = docx.Document(str(path))
        lines: list[str] = []
        for block in document.iter_inner_content():  # paragraphs and tables in document order
            if isinstance(block, Paragraph):
                style = (block.style.name if block.style is not None else "") or ""
                text = block.text.strip()
                if text and style.startswith("Heading"):
                    lines.extend(["", text, ""])  # a heading stands alone
                elif text:
                    lines.append(("- " if "List" in style else "") + text)
            elif isinstance(block, Table):
                lines.append("")
                for row in block.rows:
                    lines.append(" | ".join(cell.text.strip() for cell in row.cells))
                lines.append("")
    return join_lines(lines), [str(w.message) for w in caught]
