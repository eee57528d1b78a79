"""The public names: ``__all__`` is the one list, and what it lists exists and is documented.

Issue 11 ("Guard it: … a test of ``__all__``"; review §2.5, after httpx's
``tests/test_exported_members.py``): ``tideline/__init__.py`` listed each name three
times (type-checking imports, a name → module table, ``__all__``) and nothing checked
that they agreed, or that a module's ``__all__`` named only things that exist.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import tideline

SRC = Path(tideline.__file__).resolve().parent

def _public_modules() -> list[str]:
    names = ["tideline"]
    for info in pkgutil.walk_packages(tideline.__path__, "tideline."):
        # `__main__` modules run when imported; `_private` ones promise nothing.
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            names.append(info.name)
    return sorted(names)


MODULES = _public_modules()


def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


def _exported(name: str) -> list[tuple[str, Any]]:
    mod = _module(name)
    out = []
    for attr in getattr(mod, "__all__", ()):
        if hasattr(mod, attr):
            out.append((attr, getattr(mod, attr)))
        else:  # a submodule listed by its name (``tideline.archive.format``)
            out.append((attr, importlib.import_module(f"{name}.{attr}")))
    return out


def _commented(mod: ModuleType, attr: str) -> bool | None:
    """Whether the assignment of ``attr`` in ``mod`` is commented; None: not assigned there.

    Documented means: a comment on its line, a comment heading the block of assignments
    it belongs to (no blank line between), or an attribute docstring right below it. A
    one-line ``from … import`` of it counts as its assignment.
    """
    lines = inspect.getsource(mod).splitlines()
    for pos, line in enumerate(lines):
        if re.match(rf"{re.escape(attr)}\s*(:[^=]*)?=|{re.escape(attr)}\s*:[^=]+$"
                    rf"|from \S+ import .*\b{re.escape(attr)}\b$",
                    line):
            if "#" in line or lines[pos + 1:pos + 2] and lines[pos + 1].startswith('"'):
                return True
            above = pos - 1
            while above >= 0 and lines[above].strip():
                if lines[above].lstrip().startswith("#"):
                    return True
                above -= 1
            # An uncommented import may be documented where it comes from.
            return None if line.startswith("from ") else False
    return None


def _documented(name: str, attr: str, value: Any) -> bool:
    if inspect.ismodule(value):
        return bool((value.__doc__ or "").strip())
    # A decorated function (functools.lru_cache) is documented by the function it wraps.
    func = inspect.unwrap(value) if callable(value) else value
    if inspect.isclass(value) or inspect.isfunction(func):
        return bool((func.__doc__ or "").strip())
    mod = _module(name)
    if re.search(rf"(?<![\w.]){re.escape(attr)}\b", mod.__doc__ or ""):
        return True
    here = _commented(mod, attr)
    if here is not None:
        return here
    # A re-export: documented where it is assigned.
    for other in MODULES:
        there = sys.modules.get(other) or _module(other)
        if getattr(there, attr, None) is value and (found := _commented(there, attr)):
            return found
    return False


@pytest.mark.parametrize("name", MODULES)
def test_every_listed_name_exists(name: str) -> None:
    mod = _module(name)
    listed = list(getattr(mod, "__all__", ()))
    assert len(listed) == len(set(listed)), f"{name}.__all__ lists a name twice"
    assert _exported(name) is not None


@pytest.mark.parametrize("name", MODULES)
def test_every_listed_name_is_documented(name: str) -> None:
    missing = [attr for attr, value in _exported(name) if not _documented(name, attr, value)]
    assert not missing, f"{name}: no docstring or comment for {missing}"


def test_the_lazy_names_are_the_all() -> None:
    """Every name in ``tideline.__all__`` resolves, and the type-checking imports match."""
    for attr in tideline.__all__:
        assert getattr(tideline, attr) is not None, attr
    tree = ast.parse((SRC / "__init__.py").read_text(encoding="utf-8"))
    typed = {alias.asname or alias.name for node in ast.walk(tree)
             if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
             for sub in node.body if isinstance(sub, ast.ImportFrom) for alias in sub.names}
    assert typed | {"__version__"} == set(tideline.__all__)
    assert tideline.__all__ == sorted(tideline.__all__, key=lambda n: (n.startswith("_"), n))
    assert sorted(dir(tideline)) == sorted(tideline.__all__)
    with pytest.raises(AttributeError):
        _ = tideline.Store  # type: ignore[attr-defined]


def test_a_light_name_does_not_load_the_facade(tmp_path: Path) -> None:
    import subprocess

    code = ("import sys, tideline; tideline.InvalidInput; tideline.Turn; "
            "print('tideline.memory' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tmp_path, timeout=120)
    assert out.stdout.strip() == "False"
