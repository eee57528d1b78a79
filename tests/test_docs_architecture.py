"""docs/architecture.md maps the code as it is.

Issue 11 ("Guard it"; review §1 "Comments": "Doc rot: `docs/architecture.md` cites
`DESIGN.md` (absent) and `*.usearch` (real suffix `.vix`), and maps 7 of 15
subpackages").
"""

from __future__ import annotations

import re
from pathlib import Path

import tideline
from tideline.store.sqlite import vector_file

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(tideline.__file__).resolve().parent
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def _map() -> str:
    return DOC.split("```", 2)[1]


def test_every_subpackage_and_top_level_module_is_mapped() -> None:
    mapped = _map()
    packages = sorted(p.name for p in SRC.iterdir()
                      if p.is_dir() and (p / "__init__.py").exists())
    missing = [p for p in packages if not re.search(rf"^\s+{p}/\s", mapped, re.MULTILINE)]
    assert not missing, f"docs/architecture.md does not map {missing}"
    modules = sorted(p.name for p in SRC.glob("*.py") if p.name not in ("__init__.py",
                                                                        "__main__.py"))
    missing = [m for m in modules if not re.search(rf"^\s+{re.escape(m)}\s", mapped,
                                                   re.MULTILINE)]
    assert not missing, f"docs/architecture.md does not map {missing}"


def test_it_cites_only_files_that_exist() -> None:
    in_repo = ({p.name for p in ROOT.glob("*.md")} | {p.name for p in ROOT.glob("docs/*.md")}
               | {p.name for p in ROOT.glob("docs/lab/*.md")})
    for cited in set(re.findall(r"(?<![\w.-])([\w-]+\.md)\b", DOC)) - {"SOUL.md"}:
        # SOUL.md is the identity file a user writes into the store, not a document.
        assert cited in in_repo, f"docs/architecture.md cites {cited}, which is not here"


def test_the_index_file_suffix_is_the_real_one() -> None:
    suffixes = set(re.findall(r"index/\*(\.\w+)`", DOC))
    assert vector_file.SUFFIX in suffixes
    assert suffixes <= {vector_file.SUFFIX}, suffixes
