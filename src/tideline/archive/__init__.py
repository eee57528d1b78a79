"""The portable archive: export a store (or one namespace), import it, migrate a store.

See :mod:`tideline.archive.format` for the file format and
:mod:`tideline.archive.exchange` for the rules of import (ids kept, idempotent, all or
nothing). Nothing here holds SQL; rows go through the store's archive methods.
"""

from __future__ import annotations

__all__ = ["exchange", "format", "markdown", "paths"]
