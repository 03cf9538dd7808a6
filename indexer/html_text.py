"""HTML read as a reader sees it: the page's main text, without its navigation, header, footer, sidebars,
scripts and link lists.

The page is parsed into a small element tree (stdlib `html.parser`; unclosed `<p>`/`<li>` close where HTML
closes them). What is dropped:

- elements that hold no reading text: `script`, `style`, `nav`, `header`, `footer`, `aside`, `form`, `menu`,
  `button`, `iframe`... and elements whose ARIA role says so (`navigation`, `banner`, `contentinfo`,
  `complementary`, `search`);
- elements whose `id` or `class` names boilerplate (`breadcrumb`, `cookie`, `sidebar`, `share`, ...:
  `data/html_boilerplate.txt`);
- blocks made mostly of links ("Home | About | Contact", lists of related pages): link text over
  `LINK_DENSITY` of a block's text.

When the page marks its main content (`<main>`, `role="main"`, or a single `<article>`), only that is read.
Structure that helps chunking is kept as lines: headings and paragraphs on their own lines, list items as
"- item", table rows as cells joined by " | ".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from shared_context.text import read_word_lists

BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "main",
         "blockquote", "pre", "table", "ul", "ol", "dl", "dd", "dt", "title", "hr", "figure", "figcaption"}
# elements that hold no text a reader reads as the page's content
NOT_TEXT = {"script", "style", "noscript", "template", "svg", "head", "nav", "header", "footer", "aside", "form",
            "menu", "button", "iframe", "select", "dialog", "object", "canvas"}
NOT_TEXT_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar", "dialog"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# a tag that closes an open one of these (HTML's implied end tags)
_CLOSES = {"p": {"p"}, "li": {"li", "p"}, "dt": {"dt", "dd", "p"}, "dd": {"dt", "dd", "p"},
           "tr": {"tr", "td", "th"}, "td": {"td", "th"}, "th": {"td", "th"}}
_CLOSED_BY_BLOCK = {"p"}
# a block whose link text is more than this share of its text is navigation
LINK_DENSITY = 0.5
# elements nest at most this deep: a page of unclosed <div>s stays a shallow tree, not a recursion limit
MAX_DEPTH = 200
_WORD = re.compile(r"[a-z]+")


def _boilerplate_words() -> frozenset[str]:
    lists = read_word_lists(Path(__file__).with_name("data") / "html_boilerplate.txt")
    return frozenset(lists["ID_CLASS_WORDS"])


_BOILERPLATE = _boilerplate_words()


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)
    parent: Element | None = None
    depth: int = 0
    letters: int = 0  # letters and digits of its text (`count_letters`)
    link_letters: int = 0  # of them, those inside links

    def iter(self) -> Iterator[Element]:
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {})
        self.open = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        closes = _CLOSES.get(tag, set()) | (_CLOSED_BY_BLOCK if tag in BLOCK else set())
        while self.open.tag in closes and self.open.parent is not None:
            self.open = self.open.parent
        element = Element(tag, {k: v or "" for k, v in attrs}, parent=self.open, depth=self.open.depth + 1)
        self.open.children.append(element)
        if tag not in VOID and element.depth < MAX_DEPTH:
            self.open = element

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.open.children.append(Element(tag, {k: v or "" for k, v in attrs}, parent=self.open))

    def handle_endtag(self, tag: str) -> None:
        node: Element | None = self.open
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:  # a stray end tag closes nothing
            self.open = node.parent

    def handle_data(self, data: str) -> None:
        self.open.children.append(data)


def _boilerplate(element: Element) -> bool:
    if element.tag in ("header", "footer") and _within(element, ("article", "main")):
        return False  # an article's own header holds its title and byline
    if element.tag in NOT_TEXT or element.attrs.get("role", "").lower() in NOT_TEXT_ROLES:
        return True
    if element.attrs.get("hidden") is not None or element.attrs.get("aria-hidden") == "true":
        return True
    names = f"{element.attrs.get('id', '')} {element.attrs.get('class', '')}".lower()
    return not _BOILERPLATE.isdisjoint(_WORD.findall(names))


def _within(element: Element, tags: tuple[str, ...]) -> bool:
    node = element.parent
    while node is not None:
        if node.tag in tags:
            return True
        node = node.parent
    return False


def count_letters(element: Element, in_link: bool = False) -> None:
    """Fill `letters` and `link_letters` of the element and everything below it, once."""
    in_link = in_link or element.tag == "a"
    for child in element.children:
        if isinstance(child, str):
            n = sum(ch.isalnum() for ch in child)
            element.letters += n
            element.link_letters += n if in_link else 0
        else:
            count_letters(child, in_link)
            element.letters += child.letters
            element.link_letters += child.link_letters


def _link_list(element: Element) -> bool:
    """A block made mostly of links: navigation written as a paragraph or a list."""
    if element.tag not in BLOCK or element.tag == "table":  # a row of links is navigation, a table may hold data
        return False
    return element.letters > 0 and element.link_letters > LINK_DENSITY * element.letters


def _main(root: Element) -> Element:
    """The page's marked main content, else the whole page."""
    marked = [e for e in root.iter() if e.tag == "main" or e.attrs.get("role", "").lower() == "main"]
    if marked:
        return marked[0]
    articles = [e for e in root.iter() if e.tag == "article"]
    return articles[0] if len(articles) == 1 else root


def _pieces(element: Element) -> Iterator[str]:
    for child in element.children:
        if isinstance(child, str):
            yield child
            continue
        if _boilerplate(child) or _link_list(child):
            if child.tag in BLOCK:
                yield "\n"
            continue
        tag = child.tag
        if tag in ("td", "th"):
            yield " | "
        elif tag == "li":
            yield "\n- "
        elif tag in BLOCK:
            yield "\n"
        yield from _pieces(child)
        if tag in BLOCK and tag not in ("tr", "li"):  # rows and items stay on adjacent lines
            yield "\n"


def html_to_text(html: str) -> str:
    """The page's reading text (module docstring)."""
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    count_letters(builder.root)
    lines = (" ".join(line.split()).strip(" |") for line in "".join(_pieces(_main(builder.root))).split("\n"))
    return join_lines(lines)


def join_lines(lines: Iterable[str]) -> str:
    """Lines joined with single blank lines between blocks (runs of empty lines collapsed)."""
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()
