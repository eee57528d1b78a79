"""``tideline ui``: serve the local web app over the store until stopped."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from tideline.cli.base import app, guarded
from tideline.cli.commands import EmbOpt, NsOpt, StoreOpt

__all__ = ["ui"]


@app.command()
@guarded
def ui(
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default; "
                                      "anything else needs a token).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: any free one).")] = 8766,
    open_browser: Annotated[bool, typer.Option("--open", help="Open it in the browser.")
                            ] = False,
    token_file: Annotated[Path | None, typer.Option(
        "--token-file", help="A file holding the access token (else $TIDELINE_MCP_TOKEN); "
        "required beyond loopback, at least 16 characters.")] = None,
    store: StoreOpt = None, namespace: NsOpt = None,
    scope: Annotated[str | None, typer.Option(
        "--scope", help="The project shown first (default: the detected one).")] = None,
    embedder: EmbOpt = None,
) -> None:
    """Browse, search, correct and approve the memory in a local web app (until Ctrl-C)."""
    import socket

    import uvicorn

    from tideline.access import check_binding, read_token
    from tideline.memory import Memory
    from tideline.ui.app import build_app

    token = read_token(token_file)
    check_binding(host, token)
    mem = Memory.open(store, namespace=namespace, embedder=embedder, project=scope)
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)  # connections wait from the moment the URL is printed
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{bound}/"
        asgi = build_app(mem, host=host, port=bound, token=token)
        # The token never goes into the printed URL: the user opens it with ?token=….
        sys.stdout.write(f"tideline ui: serving namespace {mem.config.namespace!r} at {url}"
                         + (" (add ?token=<your token> once)" if token else "") + "\n")
        sys.stdout.flush()
        if open_browser:
            import webbrowser

            webbrowser.open(url)
        config = uvicorn.Config(asgi, log_level="warning", lifespan="off")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        mem.close()
