"""HTML is read as a reader sees it: the main text without navigation, header, footer, sidebars, scripts,
cookie banners and link lists."""

from __future__ import annotations

from indexer.formats import html_to_text

PAGE = """<!doctype html><html><head><title>Harbour lights</title><script>track()</script>
<style>body{}</style></head><body>
<header><a href="/">Home</a> | <a href="/about">About</a> | <a href="/contact">Contact</a></header>
<nav class="site-nav"><ul><li><a href="/a">Archive</a></li><li><a href="/b">Blog</a></li></ul></nav>
<div id="cookie-banner">We use cookies. <button>Accept</button></div>
<div class="content">
  <h1>The Corran lighthouse</h1>
  <p>The lighthouse was lit in 1851 and guided ships past the reef for a century.</p>
  <p>Its lens was ground in Glasgow and <a href="/lens">shipped north</a> by rail.</p>
  <p><a href="/prev">Previous post</a> · <a href="/next">Next post</a></p>
</div>
<aside><h2>Related</h2><p>Other lights of the coast.</p></aside>
<footer>Copyright 2024 Harbour Society. <a href="/privacy">Privacy</a></footer>
</body></html>"""


def test_navigation_and_page_furniture_are_dropped() -> None:
    text = html_to_text(PAGE)
    assert text.splitlines() == [
        "The Corran lighthouse", "",
        "The lighthouse was lit in 1851 and guided ships past the reef for a century.", "",
        "Its lens was ground in Glasgow and shipped north by rail.",
    ], text
    for furniture in ("Home", "Contact", "Archive", "cookies", "Related", "Copyright", "Previous post", "track"):
        assert furniture not in text


def test_the_marked_main_content_is_read_with_its_own_header() -> None:
    page = ("<body><div class='menu'><a href='/'>Home</a></div><main><article><header><h1>Keepers</h1>"
            "<p class='byline'>By the harbour office</p></header><p>Three keepers shared the watch.</p>"
            "<ul><li>Lamp</li><li>Lens</li></ul></article></main><p>Outside the main text.</p></body>")
    assert html_to_text(page).splitlines() == ["Keepers", "", "By the harbour office", "",
                                               "Three keepers shared the watch.", "", "- Lamp", "- Lens"]


def test_unclosed_paragraphs_and_tables_keep_their_lines() -> None:
    page = "<p>One<p>Two<table><tr><td>a<td>b<tr><td>c<td>d</table>"
    assert html_to_text(page).splitlines() == ["One", "", "Two", "", "a | b", "c | d"]


def test_a_page_of_unclosed_elements_is_read_without_a_recursion_limit() -> None:
    assert html_to_text("<div>" * 5000 + "deep text") == "deep text"
