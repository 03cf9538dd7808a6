"""Text out of rich documents: HTML (stdlib parser), PDF (pypdf), DOCX (python-docx).

Structure that helps chunking is kept as lines: headings and paragraphs on their own lines, list items
as "- item", table rows as cells joined by " | ". Parsers' own warnings are captured and returned with
the text instead of being printed, so the build summary is the one place that reports them.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path

_BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "header",
          "footer", "blockquote", "pre", "table", "ul", "ol", "dd", "dt", "title", "hr"}
_SKIP = {"script", "style", "noscript", "template", "svg", "head"}


class _HTMLText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self.skip += 1
        elif tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP and self.skip:
            self.skip -= 1
        elif tag in _BLOCK and tag not in ("tr", "li"):  # rows and items stay on adjacent lines
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()).strip(" |") for line in "".join(parser.parts).split("\n"))
    return _join_lines(lines)


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
    return _join_lines(lines), [str(w.message) for w in caught]


def _join_lines(lines: Iterable[str]) -> str:
    """Lines joined with single blank lines between blocks (runs of empty lines collapsed)."""
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()
