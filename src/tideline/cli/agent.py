"""Agent-integration commands: serve, hook, install/uninstall, import."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tideline.cli.base import app, emit, fail, guarded, turns_app
from tideline.cli.commands import EmbOpt, JsonOpt, NsOpt, StoreOpt, progress_bar
from tideline.config import Caps

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

    return Memory.open(store, namespace=namespace, embedder=embedder, project=scope)


# -- serve --------------------------------------------------------------------------------


@app.command()
@guarded
def serve(
    http: Annotated[bool, typer.Option("--http", help="Streamable HTTP instead of stdio.")] = False,
    host: Annotated[str, typer.Option(help="HTTP: address to listen on (loopback by "
                                      "default; anything else needs a token).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP: port.")] = 8765,
    token_file: Annotated[Path | None, typer.Option(
        "--token-file", help="HTTP: a file holding the bearer token required on every "
                             "request (default: $TIDELINE_MCP_TOKEN).")] = None,
    token: Annotated[str | None, typer.Option(
        "--token", hidden=True, help="Refused: a token on the command line shows in `ps`.")
    ] = None,
    path: Annotated[str, typer.Option(help="HTTP: endpoint path.")] = "/mcp",
    store: StoreOpt = None, namespace: NsOpt = None, scope: DetectedScope = None,
    embedder: EmbOpt = None,
    agent_name: Annotated[str | None, typer.Option(
        "--agent-name", help="Whose memory this is, shown in the tool descriptions and the "
                             "brief (default $TIDELINE_AGENT_NAME; the seed's AGENT_NAME).")
    ] = None,
) -> None:
    """Run the MCP server (stdio by default; --http for streamable HTTP)."""
    import dataclasses

    from tideline.errors import InvalidInput
    from tideline.mcp.server import build_server
    from tideline.mcp.transports import (
        ENV_TOKEN,
        check_binding,
        read_token,
        serve_http,
        serve_stdio,
    )

    if token is not None:
        # Every user on the machine can read a process's arguments (`ps`, /proc).
        raise InvalidInput(f"--token would show the secret in `ps`; set {ENV_TOKEN} or pass "
                           "--token-file instead")
    token = read_token(token_file) if http else None
    if http:
        check_binding(host, token)
    mem = _open(store, namespace, embedder, scope)
    if agent_name is not None:
        try:
            mem.config = dataclasses.replace(mem.config, agent_name=agent_name)
        except Exception:
            mem.close()
            raise
    try:
        server = build_server(mem)
        if http:
            def announce(bound: int) -> None:  # called once the socket is bound
                sys.stderr.write(f"tideline: MCP over HTTP at http://{host}:{bound}{path} "
                                 f"(project {mem.project or 'global'}, "
                                 f"{'token required' if token else 'no token: loopback only'})"
                                 "\n")
                sys.stderr.flush()

            serve_http(server, host=host, port=port, token=token, path=path,
                       tuning=mem.config.http, on_listening=announce)
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


def _report(changes: list[FileChange], dry_run: bool, as_json: bool, verb: str,
            wired: dict[str, Any] | None = None) -> None:
    data = (wired or {}) | {"dry_run": dry_run, "files": [c.to_dict() for c in changes]}
    if dry_run and not as_json:
        diffs = [c.diff() for c in changes if c.changed]
        emit(data, False, "\n".join(diffs) if diffs else "nothing to change")
        return

    def text() -> str:
        lines = []
        if wired and "store" in wired:
            project = wired["project"]
            unpinned = "not pinned ($TIDELINE_HOME or ~/.tideline)"
            lines += [f"store:     {wired['store'] or unpinned}",
                      f"namespace: {wired['namespace'] or 'not pinned ($TIDELINE_NAMESPACE)'}",
                      f"python:    {wired['python'] or 'tideline found on PATH'}",
                      f"project:   {project['rule_text']}"]
        for c in changes:
            if not c.changed:
                lines.append(f"{c.path}: already up to date")
                continue
            action = c.to_dict()["action"]
            backup = f" (backup: {c.backup})" if c.backup else ""
            lines.append(f"{c.path}: {verb if action == 'updated' else action}{backup}")
            lines.extend(f"  - {x}" for x in c.changes)
        for pid in (wired or {}).get("warm_stopped", []):
            lines.append(f"stopped the warm prefetch server (pid {pid})")
        return "\n".join(lines)

    emit(data, as_json, text)


def _project_rule(scope: str, project_dir: Path | None) -> dict[str, Any]:
    from tideline.project import detect_project

    here = detect_project(cwd=project_dir or Path.cwd())
    name = here.name or "global"
    if scope == "project":
        text = f"{name} (rule {here.rule}: {here.source or '-'}) for this project's sessions"
    else:
        text = (f"detected per session (TIDELINE_PROJECT, CLAUDE_PROJECT_DIR, git root, "
                f"directory name); here: {name} (rule {here.rule})")
    return here.to_dict() | {"rule_text": text}


@install_app.command("claude")
@guarded
def install_claude_cmd(
    scope: ClaudeScope = "user", project_dir: ProjectDir = None, dry_run: DryRun = False,
    store: Annotated[Path | None, typer.Option("--store", help="Store directory to pin "
                                               "(default: the one this command uses, "
                                               "$TIDELINE_HOME or ~/.tideline).")] = None,
    namespace: NsOpt = None,
    portable: Annotated[bool, typer.Option("--portable", help="Write `tideline hook …` and "
                                           "`tideline serve` found on PATH instead of "
                                           "absolute paths (settings shared in a repo); "
                                           "pins only an explicit store/namespace.")
                        ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write the MCP registration and the five hooks, pinned to this store, into Claude Code."""
    from tideline.hooks.install import install_claude, resolve_pins

    if scope not in ("user", "project"):
        raise fail("--scope must be user or project", 3)
    pins = resolve_pins(store, namespace, portable=portable)
    changes = install_claude(scope, project_dir=project_dir,  # type: ignore[arg-type]
                             store=pins.store, namespace=pins.namespace, dry_run=dry_run,
                             python=pins.python, portable=portable)
    wired = pins.to_dict() | {"scope": scope, "project": _project_rule(scope, project_dir)}
    _report(changes, dry_run, as_json, "updated", wired)


@uninstall_app.command("claude")
@guarded
def uninstall_claude_cmd(scope: ClaudeScope = "user", project_dir: ProjectDir = None,
                         dry_run: DryRun = False, as_json: JsonOpt = False) -> None:
    """Restore Claude Code's settings as they were before install; stop the warm server."""
    from tideline.hooks import warm
    from tideline.hooks.install import installed_stores, uninstall_claude

    if scope not in ("user", "project"):
        raise fail("--scope must be user or project", 3)
    stores = installed_stores(scope, project_dir)  # type: ignore[arg-type]
    changes = uninstall_claude(scope, project_dir=project_dir,  # type: ignore[arg-type]
                               dry_run=dry_run)
    stopped = [] if dry_run else [pid for home, ns in stores
                                  if (pid := warm.stop(home, ns)) is not None]
    _report(changes, dry_run, as_json, "cleaned", {"warm_stopped": stopped})


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
    for warning in res["warnings"]:
        sys.stderr.write(f"tideline: warning: {warning}\n")
    emit(res, as_json, lambda: "\n".join(res["messages"]))


@uninstall_app.command("hermes")
@guarded
def uninstall_hermes_cmd(hermes_home: HermesHome = None, dry_run: DryRun = False,
                         as_json: JsonOpt = False) -> None:
    """Remove the Tideline memory provider from Hermes Agent; select the previous one."""
    from tideline.plugins.hermes import uninstall_hermes
    from tideline.write.validate import clean_paths

    clean_paths(hermes_home, "--hermes-home")
    res = uninstall_hermes(hermes_home, dry_run=dry_run)
    emit(res, as_json, lambda: "\n".join(res["messages"]))


# -- import -------------------------------------------------------------------------------

ToolResults = Annotated[bool, typer.Option("--tool-results", help="Also keep tool results "
                                           "(shortened).")]
# Each importer has its own default project, so each states it (not the write default).
ClaudeImportScope = Annotated[str | None, typer.Option(
    "--scope", help="Project for every turn, or 'global' (default: the project named by "
                    "each transcript line's cwd, by the project rules: $TIDELINE_PROJECT, "
                    "else its git work tree, else the directory's name).")]
HermesImportScope = Annotated[str | None, typer.Option(
    "--scope", help="Project for every turn, or 'global' (default: the project named by "
                    "each session's git root or cwd, by the project rules).")]
JsonlImportScope = Annotated[str | None, typer.Option(
    "--scope", help="Project for turns whose line names no `scope` (default: as for "
                    "`tideline remember`).")]


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
    store: StoreOpt = None, namespace: NsOpt = None, scope: ClaudeImportScope = None,
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
    store: StoreOpt = None, namespace: NsOpt = None, scope: HermesImportScope = None,
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


JSONL_HELP = ("Import a JSONL chat of any length, streamed in batches (one transaction "
              "each); idempotent by (source, id), so a killed import is completed by running "
              "it again.")


@import_app.command("jsonl", help=JSONL_HELP)
@turns_app.command("import", help="Alias of `tideline import jsonl`. " + JSONL_HELP)
@guarded
def import_jsonl_cmd(
    file: Annotated[Path, typer.Argument(help="JSONL chat: one turn per line (session, role "
                                         "or speaker, text, timestamp, id).")],
    source: Annotated[str, typer.Option(help="Source system name.")] = "jsonl",
    batch: Annotated[int | None, typer.Option(
        help=f"Turns per batch and transaction (default {Caps.import_batch}).", min=1)] = None,
    store: StoreOpt = None, namespace: NsOpt = None, scope: JsonlImportScope = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    from tideline.memory import Memory

    mem = Memory.open(store, namespace=namespace, embedder=embedder)
    try:
        with progress_bar("importing turns", not as_json) as bar:
            res = mem.import_jsonl(file, scope=scope, source=source, progress=bar, batch=batch)
    finally:
        mem.close()
    emit(res | {"turn_ids": None}, as_json, lambda: _import_text(res))
