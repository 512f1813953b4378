"""A result as one self-contained HTML5 document: inline CSS, inline SVG, one small inline script.

The report must open from a laptop's downloads folder with no network (GPU servers often have none), so
nothing here names an outside `src` or `href`: no web fonts, no CDN, system fonts only. Every string that
came from a trace, a config or a store passes through `esc`: HTML-escaped, and the control and bidi
characters a terminal is kept from obeying written visibly (render/text's `safe_text`), so a kernel named
`<script>` or `\\u202e…` stays text.
"""

from __future__ import annotations

import html as _html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rooftop.tui.render.text import safe_text

__all__ = ["Cell", "Figure", "esc", "figure", "headline", "notes", "page", "prose", "rooftop_version", "section",
           "table"]


def esc(text: object) -> str:
    """`text` safe inside HTML text or a quoted attribute: control and bidi characters written visibly, then
    `& < > " '` escaped."""
    return _html.escape(safe_text(text), quote=True)


def rooftop_version() -> str:
    """The installed rooftop's version, which a report names beside the command that made it."""
    # deferred: importlib.metadata (~15 ms: it loads email and zipfile), only when a report is written
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rooftop")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


@dataclass(frozen=True)
class Cell:
    """A table cell: the text shown and, for a figure, the number it sorts by (SI units: `1.2 ms` sorts as
    0.0012); `title` is its hover text (a cropped name's whole)."""

    text: str
    sort: float | None = None
    title: str = ""


def _cell(c: object, numeric: bool) -> str:
    if not isinstance(c, Cell):
        c = Cell("" if c is None else str(c))
    attrs = ' class="num"' if numeric else ""
    if c.sort is not None:
        attrs += f' data-sort="{c.sort!r}"'
    if c.title:
        attrs += f' title="{esc(c.title)}"'
    return f"<td{attrs}>{esc(c.text)}</td>"


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, sortable: bool = True,
          numeric_cols: Iterable[int] = (), caption: str = "", css: str = "") -> str:
    """A table of `rows` (each cell a str or a `Cell`) under `headers`. `numeric_cols`: the columns of figures,
    right-aligned and sorted by number (a Cell's `sort`, else its text read as a number). `sortable`: a click on
    a heading sorts by that column (the page's one script)."""
    nums = set(numeric_cols)
    klass = " ".join(x for x in ("sortable" if sortable else "", css) if x)
    num = ' class="num"'
    head = "".join(f'<th{num if i in nums else ""} scope="col">{esc(h)}</th>' for i, h in enumerate(headers))
    body = "\n".join("<tr>" + "".join(_cell(c, i in nums) for i, c in enumerate(r)) + "</tr>" for r in rows)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    klass_attr = f' class="{klass}"' if klass else ""
    return (f'<div class="scroll"><table{klass_attr}>{cap}'
            f"<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table></div>")


def section(heading: str, *body: str, anchor: str = "") -> str:
    """A titled part of the report; `body` is HTML already made (tables, figures, prose)."""
    ident = f' id="{esc(anchor)}"' if anchor else ""
    return f"<section{ident}>\n<h2>{esc(heading)}</h2>\n" + "\n".join(b for b in body if b) + "\n</section>"


def prose(text: str, css: str = "") -> str:
    """A paragraph of plain text (escaped)."""
    return f'<p class="{esc(css)}">{esc(text)}</p>' if css else f"<p>{esc(text)}</p>"


def notes(lines: Iterable[str], css: str = "note") -> str:
    """A list of short lines (flags, notes, problems), each escaped; '' when there is none."""
    items = [f"<li>{esc(line)}</li>" for line in lines if line]
    return f'<ul class="{esc(css)}">' + "".join(items) + "</ul>" if items else ""


@dataclass(frozen=True)
class Figure:
    """One headline figure: what it is, its value as shown, and a short line under it."""

    label: str
    value: str
    detail: str = ""


def headline(figures: Sequence[Figure]) -> str:
    """The figures a reader looks at first, as a row of tiles."""
    def tile(f: Figure) -> str:
        detail = f'<div class="detail">{esc(f.detail)}</div>' if f.detail else ""
        return f'<div class="tile"><div class="label">{esc(f.label)}</div><div class="value">{esc(f.value)}</div>{detail}</div>'

    tiles = "".join(tile(f) for f in figures)
    return f'<div class="headline">{tiles}</div>'


def figure(svg: str, caption: str = "") -> str:
    """A chart: an inline <svg> document made by rooftop (not escaped: it is markup, its texts escaped where it
    was drawn), with an escaped caption."""
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure class="chart">{svg}{cap}</figure>'


CSS = """
:root { color-scheme: light; --ink: #1d232b; --muted: #5b6570; --rule: #dfe3e8; --band: #f5f7f9; --accent: #2563eb;
  --warn: #a15c00; --bad: #b42318; }
* { box-sizing: border-box; }
html { font-size: 15px; }
body { margin: 0; color: var(--ink); background: #fff; line-height: 1.45;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1120px; margin: 0 auto; padding: 28px 32px 48px; }
header.report { border-bottom: 1px solid var(--rule); padding-bottom: 14px; margin-bottom: 18px; }
h1 { font-size: 1.55rem; font-weight: 650; margin: 0 0 4px; letter-spacing: -0.01em; }
.subtitle { color: var(--muted); margin: 0; }
h2 { font-size: 1.1rem; font-weight: 650; margin: 30px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--rule); }
section > p { margin: 6px 0; max-width: 80ch; }
.headline { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 10px; margin: 14px 0 6px; }
.tile { background: var(--band); border: 1px solid var(--rule); border-radius: 6px; padding: 10px 12px; }
.tile .label { color: var(--muted); font-size: 0.78rem; text-transform: uppercase; letter-spacing: 0.04em; }
.tile .value { font-size: 1.45rem; font-weight: 650; font-variant-numeric: tabular-nums; margin-top: 2px; }
.tile .detail { color: var(--muted); font-size: 0.8rem; margin-top: 2px; }
figure.chart { margin: 12px 0; }
figure.chart svg { max-width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 0.85rem; margin-top: 4px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.87rem; margin: 6px 0 4px; min-width: 50%; }
caption { text-align: left; color: var(--muted); font-size: 0.82rem; padding: 0 0 4px; caption-side: top; }
th, td { padding: 4px 10px; text-align: left; vertical-align: top; border-bottom: 1px solid var(--rule); }
td { max-width: 46ch; overflow-wrap: anywhere; }
thead th { border-bottom: 2px solid #c9d0d8; font-weight: 600; white-space: nowrap; background: #fff;
  position: sticky; top: 0; }
tbody tr:nth-child(even) { background: #fafbfc; }
tbody tr:hover { background: #eef3fb; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th::after { content: " \\2195"; color: #b0b8c1; font-size: 0.75em; }
table.sortable th[aria-sort="ascending"]::after { content: " \\2191"; color: var(--accent); }
table.sortable th[aria-sort="descending"]::after { content: " \\2193"; color: var(--accent); }
ul.note, ul.flag, ul.problem { margin: 6px 0; padding-left: 1.2em; max-width: 90ch; }
ul.flag li { color: var(--bad); }
ul.problem li { color: var(--warn); }
p.muted, .muted { color: var(--muted); font-size: 0.85rem; }
footer { margin-top: 36px; padding-top: 10px; border-top: 1px solid var(--rule); color: var(--muted); font-size: 0.8rem; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 0.85em;
  background: var(--band); padding: 1px 4px; border-radius: 3px; overflow-wrap: anywhere; }
@media print { thead th { position: static; } main { padding: 0; } }
"""

# Sorts a table.sortable by the heading clicked: by each cell's data-sort (or its text read as a number) in a
# numeric column, by its text otherwise. It marks the page data-sortable="ready" once set up (the browser test
# reads that, to know the script ran).
SCRIPT = """
(function () {
  function key(td, num) {
    if (!td) return num ? -Infinity : "";
    var s = td.getAttribute("data-sort");
    if (num) { var v = parseFloat(s !== null ? s : td.textContent.replace(/[^0-9eE+.\\-]/g, ""));
      return isNaN(v) ? -Infinity : v; }
    return td.textContent.toLowerCase();
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener("click", function () {
        var num = th.classList.contains("num");
        var down = th.getAttribute("aria-sort") !== (num ? "descending" : "ascending");
        var dir = num ? (down ? -1 : 1) : (down ? 1 : -1);
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", (dir < 0) ? "descending" : "ascending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[col], num), y = key(b.cells[col], num);
          return x < y ? -dir : x > y ? dir : 0;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.documentElement.setAttribute("data-sortable", "ready");
})();
"""


def page(title: str, sections: list[str], *, version: str, command: str, subtitle: str = "") -> str:
    """The whole report: `title` and `subtitle` (escaped) over `sections` (HTML already made), and a footer
    naming the rooftop version and the command that made it."""
    sub = f'<p class="subtitle">{esc(subtitle)}</p>' if subtitle else ""
    body = "\n".join(sections)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="rooftop {esc(version)}">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
        f'<header class="report"><h1>{esc(title)}</h1>{sub}</header>\n{body}\n'
        f"<footer>Made by rooftop {esc(version)}: <code>{esc(command)}</code></footer>\n"
        f"</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n"
    )
