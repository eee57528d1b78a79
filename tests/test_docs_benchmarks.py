"""docs/benchmarks.md stays a page of record, and the README quotes it faithfully.

The page holds each benchmark once with its current figures; the history lives in
docs/lab/, one file per topic, each ending with what was learned. Every figure the
README gives for a benchmark must stand, to the letter, in the page's "At a glance"
table, so a new measurement that changes the page fails here until the README follows.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGE = (DOCS / "benchmarks.md").read_text("utf-8")
README = (ROOT / "README.md").read_text("utf-8")

# A figure: a decimal (0.866, 3.2) or a whole number with a unit (93 µs, 19 ms).
FIGURE = re.compile(r"(?<![\w.])(\d+\.\d+|\d+(?=\s?(?:ms|µs|s|×)\b))")


def _glance() -> str:
    match = re.search(r"^## At a glance\n(.*?)^## ", PAGE, flags=re.S | re.M)
    assert match, "docs/benchmarks.md has no 'At a glance' section"
    return match.group(1)


def test_page_of_record_is_short() -> None:
    lines = PAGE.count("\n")
    assert lines <= 500, f"docs/benchmarks.md has {lines} lines; move history to docs/lab/"


def test_each_benchmark_section_appears_once() -> None:
    heads = re.findall(r"^## (.+)$", PAGE, flags=re.M)
    assert len(heads) == len(set(heads)), heads


def test_lab_files_end_with_what_was_learned() -> None:
    files = sorted((DOCS / "lab").glob("*.md"))
    assert files, "docs/lab/ is empty"
    for path in files:
        text = path.read_text("utf-8")
        assert text.startswith("# "), f"{path.name} has no title"
        last = re.findall(r"^## (.+)$", text, flags=re.M)[-1]
        assert last == "What was learned", f"{path.name} ends with {last!r}"


def test_lab_files_are_linked_from_the_page() -> None:
    for path in (DOCS / "lab").glob("*.md"):
        assert f"(lab/{path.name})" in PAGE, f"docs/lab/{path.name} is not linked"


def test_readme_figures_agree_with_the_page() -> None:
    glance = _glance()
    cited = [line for line in README.splitlines() if "docs/benchmarks.md" in line]
    assert cited, "the README cites no benchmark figure"
    figures = [f for line in cited for f in FIGURE.findall(line)]
    assert figures, "the README's benchmark lines hold no figure"
    missing = [f for f in figures if not re.search(rf"(?<![\d.]){re.escape(f)}(?![\d])", glance)]
    assert not missing, f"README figures not in the page of record's glance table: {missing}"
