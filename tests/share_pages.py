"""An HTML report read back with html.parser: its tables (by section), every attribute that could fetch
something, its scripts and its text. For the share tests: what a browser would load, and what a reader sees."""

from __future__ import annotations

from dataclasses import dataclass, field
import re
from html.parser import HTMLParser

FETCHING = {"src", "href", "srcset", "action", "formaction", "poster", "data", "background", "xlink:href"}


@dataclass
class Table:
    section: str
    headers: list[str] = field(default_factory=list)
    rows: list[list[tuple[str, dict]]] = field(default_factory=list)  # (text, attributes) per cell

    def column(self, name: str) -> list[tuple[str, dict]]:
        i = self.headers.index(name)
        return [r[i] for r in self.rows]


class Page(HTMLParser):
    """The parts of a report the tests look at."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[Table] = []
        self.fetching: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.scripts: list[str] = []
        self.texts: list[str] = []
        self.tags: list[str] = []
        self._section = ""
        self._cell: list[str] | None = None
        self._attrs: dict = {}
        self._head = False
        self._script: list[str] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        self.tags.append(tag)
        for k, v in attrs:  # a reference inside the page (`#id`: an SVG's <use>, its clip paths) fetches nothing
            outside = re.search(r"url\(\s*['\"]?(?!#)", v or "")
            if (k.lower() in FETCHING and not (v or "").startswith("#")) or outside:
                self.fetching.append((tag, k, v or ""))
        if tag == "section":
            self._section = a.get("id", "")
        elif tag == "table":
            self.tables.append(Table(self._section))
        elif tag == "thead":
            self._head = True
        elif tag == "tbody":
            self._head = False
        elif tag == "tr" and self.tables and not self._head:
            self.tables[-1].rows.append([])
        elif tag in ("td", "th") and self.tables:
            self._cell, self._attrs = [], a
        elif tag == "script":
            self._script = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            text = "".join(self._cell).strip()
            if self._head:
                self.tables[-1].headers.append(text)
            else:
                self.tables[-1].rows[-1].append((text, self._attrs))
            self._cell = None
        elif tag == "script" and self._script is not None:
            self.scripts.append("".join(self._script))
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._script.append(data)
            return
        self.texts.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def table(self, section: str, index: int = 0) -> Table:
        return [t for t in self.tables if t.section == section][index]

    def text(self) -> str:
        return " ".join(self.texts)
