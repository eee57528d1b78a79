"""What a memory is opened with: the settings, the embedder and the project.

:meth:`tideline.Memory.open` checks its arguments and resolves them here before the
runtime is built: the settings are loaded (environment, then the caller's overrides),
an existing store opens with the embedder it was built with unless one is named (its
marker is read without opening the store), and the project is detected by the rules
of :mod:`tideline.project`. ``tideline import tideline`` opens a store that does not
exist yet with the archive's embedder instead (:func:`import_target`).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from tideline.config import Config
from tideline.embed import Embedder, embedder_from_marker, make_embedder
from tideline.project import ProjectInfo, detect_project
from tideline.store import peek_meta
from tideline.write.validate import clean_instance, clean_name, clean_paths

__all__ = ["import_target", "resolve"]


def resolve(
    home: str | os.PathLike[str] | None, *, namespace: str | None,
    embedder: str | Embedder | None, project: str | None, config: Config | None,
    database: str | None,
) -> tuple[Config, Embedder, ProjectInfo]:
    """The settings, embedder and project of :meth:`tideline.Memory.open`'s arguments.

    Returns:
        The settings in force, the embedder to open with and the detected project.

    Raises:
        InvalidInput: an argument of the wrong type, or a malformed name or path.
        EmbedderError: the named (or stored) embedder cannot be built here.
    """
    clean_instance(config, Config, "config", "a Config")
    clean_instance(home, (str, os.PathLike), "home", "a directory path")
    clean_instance(embedder, (str, Embedder), "embedder", "an embedder name or instance")
    clean_instance(project, str, "project", "a project name")
    clean_instance(database, str, "database", "a postgresql:// URL")
    if home is not None:
        clean_paths([home], "home")
    cfg = config or Config.load()
    overrides: dict[str, Any] = {}
    if home is not None:
        overrides["home"] = Path(home).expanduser()
    if namespace is not None:
        overrides["namespace"] = clean_name(namespace, "namespace", cfg.caps)
    if isinstance(embedder, str):
        overrides["embedder"] = embedder
    if database is not None:
        overrides["database"] = database
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    clean_name(cfg.namespace, "namespace", cfg.caps)
    stored = None
    if embedder is None and config is None and not os.environ.get("TIDELINE_EMBEDDER"):
        stored = peek_meta(cfg.home, "embedder", database=cfg.database)
    if stored is not None:
        instance = embedder_from_marker(stored)
    elif embedder is None or isinstance(embedder, str):
        instance = make_embedder(cfg.embedder, url=cfg.embed_url, model=cfg.embed_model)
    else:
        instance = embedder
    if instance.name in ("http", "http-pending"):
        from tideline.embed.pending import settle

        known = stored or peek_meta(cfg.home, "embedder", database=cfg.database)
        instance = settle(instance, known)  # type: ignore[assignment]
    if project is not None:
        clean_name(project, "project", cfg.caps)
    return cfg, instance, detect_project(explicit=project)


def import_target(home: Path | None, embedder: str | None,
                  path: Path) -> tuple[Path, str | Embedder | None]:
    """The store directory and embedder ``tideline import tideline`` opens: a store that
    does not exist yet takes the archive's embedder (unless one is named).

    Raises:
        ArchiveInvalid: the archive's header is invalid.
        EmbedderError: the archive's embedder cannot be built here.
    """
    from tideline.archive.format import ArchiveReader
    from tideline.store.sqlite.schema import SCHEMA_VERSION

    cfg = Config.load(**({"home": Path(home).expanduser()} if home is not None else {}))
    if (embedder is None and not os.environ.get("TIDELINE_EMBEDDER")
            and peek_meta(cfg.home, "embedder", database=cfg.database) is None):
        head = ArchiveReader(Path(path), SCHEMA_VERSION).read_header()
        return cfg.home, embedder_from_marker(head.embedder)
    return cfg.home, embedder
