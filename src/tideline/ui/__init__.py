"""``tideline ui``: a local web app to browse, search, correct and approve the memory.

:func:`~tideline.ui.app.build_app` builds the ASGI app over one opened
:class:`~tideline.Memory`; the ``tideline ui`` command (:mod:`tideline.cli.ui`) serves it
with uvicorn until stopped.
"""

from __future__ import annotations

__all__: list[str] = []
