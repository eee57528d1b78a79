"""The ``tideline`` command line: the same verbs as the Python API.

Every command that touches data takes ``--store DIR``, ``--namespace NAME`` and
``--scope NAME``, and ``--database URL`` (a ``postgresql://`` database to keep the
memory in; ``--store`` is then this host's local state); every command that
returns data takes ``--json``. Errors are one line on stderr with a distinct exit
code (see :mod:`tideline.errors`), never a traceback.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer

__all__ = ["DISTRIBUTION", "app", "database_first", "installed_version", "main"]

#: The name on PyPI (``pip install tideline-memory``); import name and command are ``tideline``.
DISTRIBUTION = "tideline-memory"

#: The ``tideline`` command (its sub-commands register themselves on it).
app = typer.Typer(
    name="tideline",
    help="Tideline: long-term memory for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
turns_app = typer.Typer(help="Raw conversation turns (texture).", no_args_is_help=True)
app.add_typer(turns_app, name="turns")

F = TypeVar("F", bound=Callable[..., Any])
INTERNAL_ERROR = 70


def installed_version() -> str:
    """The installed distribution's version (``importlib.metadata``).

    Falls back to ``tideline.__version__`` with a note when the package runs from a
    source tree that was never installed.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        from tideline import __version__

        return f"{__version__} (not installed as {DISTRIBUTION})"


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"{DISTRIBUTION} {installed_version()}\n")
        raise typer.Exit(0)


def _use_database(value: str | None) -> None:
    # Config.load reads it: one place for every command that opens the store.
    if value:
        os.environ["TIDELINE_DATABASE_URL"] = value


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.",
                                 callback=_print_version, is_eager=True),
    database: str | None = typer.Option(
        None, "--database", metavar="URL", callback=_use_database, is_eager=True,
        help="Keep the memory in this PostgreSQL database (postgresql://…; default "
             "$TIDELINE_DATABASE_URL); --store is then this host's local state."),
) -> None:
    """Tideline: long-term memory for LLM agents."""


def database_first(args: list[str]) -> list[str]:
    """Move a ``--database URL`` given anywhere (``tideline recall q --database URL``) to
    the front, where the root option reads it: one option for every command."""
    out: list[str] = []
    front: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.extend(args[i:])
            break
        if arg == "--database" and i + 1 < len(args):
            front += args[i:i + 2]
            i += 2
            continue
        if arg.startswith("--database="):
            front.append(arg)
        else:
            out.append(arg)
        i += 1
    return front + out


def emit(data: Any, as_json: bool, text: Callable[[], str] | str | None = None) -> None:
    """Print ``data`` as one JSON document, or its human rendering."""
    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
        return
    rendered = text() if callable(text) else text
    if rendered is None:
        rendered = json.dumps(data, ensure_ascii=False, indent=2, default=str)
    from rich.console import Console

    Console(soft_wrap=True, highlight=False).print(rendered, markup=False)


def fail(message: str, code: int) -> typer.Exit:
    """Write one error line to stderr and return the exit to raise."""
    sys.stderr.write(f"tideline: error: {message}\n")
    return typer.Exit(code)


def guarded(fn: F) -> F:
    """Turn every error into one stderr line and a distinct exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from tideline.errors import TidelineError

        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except TidelineError as exc:
            raise fail(f"{exc.code}: {exc}", exc.exit_code) from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130) from None
        except BrokenPipeError:
            raise typer.Exit(0) from None
        except Exception as exc:  # the CLI must never print a traceback
            raise fail(f"internal: {type(exc).__name__}: {exc}", INTERNAL_ERROR) from None

    return wrapper  # type: ignore[return-value]


def main() -> None:
    """Console-script entry point."""
    # Importing the modules registers their commands on ``app``.
    from tideline.cli import agent, archive, commands, dream, sleep, ui  # noqa: F401

    sys.argv[1:] = database_first(sys.argv[1:])
    app()
