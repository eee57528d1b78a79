"""Agent-integration commands: serve, hook, install/uninstall, import."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tideline.cli import app, emit, fail, guarded
from tideline.cli.commands import EmbOpt, JsonOpt, NsOpt, ScopeOpt, StoreOpt, progress_bar

if TYPE_CHECKING:
    from tideline.hooks.install import FileChange
    from tideline.memory import Memory

hook_app = typer.Typer(help="Claude Code hooks: read the hook's JSON on stdin, answer on "
                       "stdout; never fail the agent.", no_args_is_help=True)
install_app = typer.Typer(help="Register Tideline with an agent runtime.", no_args_is_help=True)
uninstall_app = typer.Typer(help="Remove exactly what `tideline install` added.",
                            no_args_is_help=True)
import_app = typer.Typer(help="Import conversations into raw context (idempotent).",
                         no_args_is_help=True)
app.add_typer(hook_app, name="hook")
app.add_typer(install_app, name="install")
app.add_typer(uninstall_app, name="uninstall")
app.add_typer(import_app, name="import")


DetectedScope = Annotated[str | None, typer.Option(
    "--scope", help="Project scope (default: detected — $TIDELINE_PROJECT, the client's project "
                    "dir, the git root, the directory name).")]


def _open(store: Path | None, namespace: str | None, embedder: str | None,
          scope: str | None) -> Memory:
    from tideline.memory import Memory
    from tideline.project import detect_project

    info = detect_project(explicit=scope)
    mem = Memory.open(store, namespace=namespace, embedder=embedder, project=info.name)
    mem.use_project(info)
    return mem


# -- serve --------------------------------------------------------------------------------


@app.command()
@guarded
def serve(
    http: Annotated[bool, typer.Option("--http", help="Streamable HTTP instead of stdio.")] = False,
    host: Annotated[str, typer.Option(help="HTTP: address to listen on (loopback by "
                                      "default; anything else needs --token).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP: port.")] = 8765,
    token: Annotated[str | None, typer.Option(
        help="HTTP: bearer token required on every request (or $TIDELINE_MCP_TOKEN).",
        envvar="TIDELINE_MCP_TOKEN", show_envvar=True)] = None,
    path: Annotated[str, typer.Option(help="HTTP: endpoint path.")] = "/mcp",
    store: StoreOpt = None, namespace: NsOpt = None, scope: DetectedScope = None,
    embedder: EmbOpt = None,
) -> None:
    """Run the MCP server (stdio by default; --http for streamable HTTP)."""
    from tideline.mcp.http import check_binding, serve_http, serve_stdio
    from tideline.mcp.server import build_server

    if http:
        check_binding(host, token)
    mem = _open(store, namespace, embedder, scope)
    try:
        server = build_server(mem)
        if http:
            sys.stderr.write(f"tideline: MCP over HTTP at http://{host}:{port}{path} "
                             f"(project {mem.project or 'global'}, "
                             f"{'token required' if token else 'no token: loopback only'})\n")
            serve_http(server, host=host, port=port, token=token, path=path)
        else:
            serve_stdio(server)
    finally:
        mem.close()


# -- hooks --------------------------------------------------------------------------------


def _hook(event: str, store: Path | None, namespace: str | None) -> None:
    from tideline.config import Config
    from tideline.hooks.claude import run_hook

    overrides: dict[str, Any] = {}
    if store is not None:
        overrides["home"] = store
    if namespace:
        overrides["namespace"] = namespace
    try:
        config = Config.load(**overrides)
    except Exception as exc:  # a hook never fails the agent
        sys.stderr.write(f"tideline hook {event}: settings: {exc}\n")
        return
    raw = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    outcome = run_hook(event, raw, config)
    if outcome.stdout:
        sys.stdout.write(outcome.stdout + "\n")
    if outcome.stderr:
        sys.stderr.write(outcome.stderr + "\n")


@hook_app.command("session-start")
def hook_session_start(store: StoreOpt = None, namespace: NsOpt = None) -> None:
    """SessionStart: inject the brief (T0 identity, T2 high-weight, T2b texture, T3 map)."""
    _hook("session-start", store, namespace)


@hook_app.command("prompt")
def hook_prompt(store: StoreOpt = None, namespace: NsOpt = None) -> None:
    """UserPromptSubmit: inject the prefetch (T1 session bridge, T4 active retrieval)."""
    _hook("prompt", store, namespace)


@hook_app.command("stop")
def hook_stop(store: StoreOpt = None, namespace: NsOpt = None) -> None:
    """Stop: record the new turns of the transcript, then run the gated sleep."""
    _hook("stop", store, namespace)


@hook_app.command("pre-compact")
def hook_pre_compact(store: StoreOpt = None, namespace: NsOpt = None) -> None:
    """PreCompact: import the whole transcript into raw context (idempotent)."""
    _hook("pre-compact", store, namespace)


@hook_app.command("session-end")
def hook_session_end(store: StoreOpt = None, namespace: NsOpt = None) -> None:
    """SessionEnd: import the whole transcript into raw context (idempotent)."""
    _hook("session-end", store, namespace)


# -- install / uninstall ------------------------------------------------------------------

ClaudeScope = Annotated[str, typer.Option("--scope", help="user (~/.claude) or project "
                                          "(.claude/ and .mcp.json here).")]
ProjectDir = Annotated[Path | None, typer.Option("--project-dir", help="Project root for "
                                                 "--scope project (default: cwd).")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Show the changes, write nothing.")]


def _report(changes: list[FileChange], dry_run: bool, as_json: bool, verb: str) -> None:
    data = {"dry_run": dry_run, "files": [c.to_dict() for c in changes]}
    if dry_run and not as_json:
        diffs = [c.diff() for c in changes if c.changed]
        emit(data, False, "\n".join(diffs) if diffs else "nothing to change")
        return

    def text() -> str:
        lines = []
        for c in changes:
            if not c.changed:
                lines.append(f"{c.path}: already up to date")
                continue
            backup = f" (backup: {c.backup})" if c.backup else ""
            lines.append(f"{c.path}: {verb}{backup}")
            lines.extend(f"  - {x}" for x in c.changes)
        return "\n".join(lines)

    emit(data, as_json, text)


@install_app.command("claude")
@guarded
def install_claude_cmd(
    scope: ClaudeScope = "user", project_dir: ProjectDir = None, dry_run: DryRun = False,
    store: Annotated[Path | None, typer.Option("--store", help="Pin this store directory "
                                               "(default: $TIDELINE_HOME or ~/.tideline "
                                               "at run time).")] = None,
    namespace: NsOpt = None,
    portable: Annotated[bool, typer.Option("--portable", help="Write `tideline hook …` and "
                                           "`tideline serve` found on PATH instead of "
                                           "absolute paths (settings shared in a repo).")
                        ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write the MCP registration and the five hooks into Claude Code's settings."""
    from tideline.hooks.install import install_claude

    if scope not in ("user", "project"):
        raise fail("--scope must be user or project", 3)
    pinned = store.expanduser().resolve() if store is not None else None
    changes = install_claude(scope, project_dir=project_dir, store=pinned,  # type: ignore[arg-type]
                             namespace=namespace, dry_run=dry_run, portable=portable)
    _report(changes, dry_run, as_json, "updated")


@uninstall_app.command("claude")
@guarded
def uninstall_claude_cmd(scope: ClaudeScope = "user", project_dir: ProjectDir = None,
                         dry_run: DryRun = False, as_json: JsonOpt = False) -> None:
    """Remove Tideline's hooks and MCP registration from Claude Code's settings."""
    from tideline.hooks.install import uninstall_claude

    if scope not in ("user", "project"):
        raise fail("--scope must be user or project", 3)
    changes = uninstall_claude(scope, project_dir=project_dir,  # type: ignore[arg-type]
                               dry_run=dry_run)
    _report(changes, dry_run, as_json, "cleaned")


HermesHome = Annotated[Path | None, typer.Option("--hermes-home", help="Hermes home "
                                                 "(default $HERMES_HOME or ~/.hermes).")]


@install_app.command("hermes")
@guarded
def install_hermes_cmd(hermes_home: HermesHome = None, dry_run: DryRun = False,
                       as_json: JsonOpt = False) -> None:
    """Install the Tideline memory provider into Hermes Agent and select it."""
    from tideline.plugins.hermes import install_hermes
    from tideline.write.validate import clean_paths

    clean_paths(hermes_home, "--hermes-home")
    res = install_hermes(hermes_home, dry_run=dry_run)
    emit(res, as_json, lambda: "\n".join(res["messages"]))


@uninstall_app.command("hermes")
@guarded
def uninstall_hermes_cmd(hermes_home: HermesHome = None, dry_run: DryRun = False,
                         as_json: JsonOpt = False) -> None:
    """Remove the Tideline memory provider from Hermes Agent."""
    from tideline.plugins.hermes import uninstall_hermes
    from tideline.write.validate import clean_paths

    clean_paths(hermes_home, "--hermes-home")
    res = uninstall_hermes(hermes_home, dry_run=dry_run)
    emit(res, as_json, lambda: "\n".join(res["messages"]))


# -- import -------------------------------------------------------------------------------

ToolResults = Annotated[bool, typer.Option("--tool-results", help="Also keep tool results "
                                           "(shortened).")]


def _import_text(res: dict[str, Any]) -> str:
    dropped = ", ".join(f"{k} {v}" for k, v in sorted(res.get("dropped", {}).items()))
    head = (f"imported {res['inserted']} turn(s) from {res.get('sessions', 0)} session(s)"
            + (f" in {res['files']} file(s)" if "files" in res else "")
            + f"; {res['skipped']} already stored")
    return head + (f"\nskipped as noise: {dropped}" if dropped else "")


@import_app.command("claude")
@guarded
def import_claude_cmd(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="Transcripts or directories (default: ~/.claude/projects).")] = None,
    tool_results: ToolResults = False,
    store: StoreOpt = None, namespace: NsOpt = None, scope: ScopeOpt = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Import Claude Code transcripts (message uuid = id, original timestamps kept)."""
    from tideline.memory import Memory

    mem = Memory.open(store, namespace=namespace, embedder=embedder)
    try:
        with progress_bar("importing Claude Code turns", not as_json) as bar:
            res = mem.import_claude(paths or None, scope=scope, tool_results=tool_results,
                                    progress=bar)
    finally:
        mem.close()
    emit(res | {"turn_ids": None}, as_json, lambda: _import_text(res))


@import_app.command("hermes")
@guarded
def import_hermes_cmd(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="state.db, `hermes sessions export` JSONL or a Hermes home "
             "(default: $HERMES_HOME or ~/.hermes).")] = None,
    session: Annotated[str | None, typer.Option(help="Only this session (id or prefix).")] = None,
    tool_results: ToolResults = False,
    store: StoreOpt = None, namespace: NsOpt = None, scope: ScopeOpt = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Import Hermes Agent sessions (idempotent; live-captured turns are not duplicated)."""
    from tideline.memory import Memory

    mem = Memory.open(store, namespace=namespace, embedder=embedder)
    try:
        with progress_bar("importing Hermes turns", not as_json) as bar:
            res = mem.import_hermes(paths or None, scope=scope, session=session,
                                    tool_results=tool_results, progress=bar)
    finally:
        mem.close()
    emit(res | {"turn_ids": None}, as_json, lambda: _import_text(res))


@import_app.command("jsonl")
@guarded
def import_jsonl_cmd(
    file: Annotated[Path, typer.Argument(help="JSONL chat: one turn per line (session, role "
                                         "or speaker, text, timestamp, id).")],
    source: Annotated[str, typer.Option(help="Source system name.")] = "jsonl",
    store: StoreOpt = None, namespace: NsOpt = None, scope: ScopeOpt = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Import a generic JSONL chat (idempotent by message id)."""
    from tideline.memory import Memory

    mem = Memory.open(store, namespace=namespace, embedder=embedder)
    try:
        with progress_bar("importing turns", not as_json) as bar:
            res = mem.import_jsonl(file, scope=scope, source=source, progress=bar)
    finally:
        mem.close()
    emit(res | {"turn_ids": None}, as_json, lambda: _import_text(res))

