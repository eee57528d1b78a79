"""Sleep and report commands: ``sleep``, ``report``, ``heatmap``, ``scan``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from tideline.cli.base import app, emit, fail, guarded
from tideline.cli.commands import EmbOpt, JsonOpt, NsOpt, ScopeOpt, StoreOpt, opened

_SLEEP_FAILED = 40
_WRITE_FAILED = 41


def _sleep_text(res: dict[str, Any]) -> str:
    if res.get("skipped"):
        return (f"sleep skipped ({res['reason']}); last sleep {res.get('last_sleep') or '—'} "
                f"[{res.get('ms', 0):.1f} ms]")
    lines = [f"slept in {res['ms'] / 1000:.2f} s; memories {res['memories']['before']} → "
             f"{res['memories']['after']}; backup {res['backup'] or 'off'}"]
    for name, m in res["steps"].items():
        brief = {k: v for k, v in m.items() if isinstance(v, int | float) and k != "ms"}
        shown = ", ".join(f"{k} {v}" for k, v in list(brief.items())[:7])
        lines.append(f"  {name:<11} {m.get('ms', 0):>8.1f} ms  {shown}")
        if "error" in m:
            lines.append(f"    error: {m['error']}")
    for name, reason in res.get("stopped", {}).items():
        lines.append(f"  ! {name} stopped: {reason}")
    return "\n".join(lines)


@app.command()
@guarded
def sleep(
    only: Annotated[str | None, typer.Option(
        "--only", help="Run one step: plasticity, dynamics, recurrence, entities, topics, "
                       "clusters, attention, backfill or scan.")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Run even if nothing changed; allow large demotions/prunes; "
                        "rebuild clusters.")] = False,
    wait: Annotated[float | None, typer.Option(
        "--wait", help="Seconds to wait for a sleep running elsewhere.")] = None,
    store: StoreOpt = None, namespace: NsOpt = None, embedder: EmbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Consolidate: backup, plasticity, dynamics, clusters, entities (gated, no LLM)."""
    if only is None and not force:
        from tideline.config import Config
        from tideline.sleep.gate import quick_skip

        cfg = Config.load(home=store, namespace=namespace)
        gated = quick_skip(cfg.home, cfg.namespace, cfg.sleep.refresh_after_hours,
                           database=cfg.database)
        if gated is not None:
            emit(gated, as_json, lambda: _sleep_text(gated))
            return
    from tideline.cli.commands import progress_bar
    from tideline.errors import InvalidInput
    from tideline.sleep.orchestrate import STEPS

    if only is not None and only not in STEPS:  # before the progress bar touches stderr
        raise InvalidInput(f"unknown sleep step {only!r}; steps: {', '.join(STEPS)}")
    with opened(store, namespace, embedder) as mem, \
            progress_bar("sleeping", not as_json) as bar:
        def step(name: str) -> None:
            if bar is not None:
                bar(STEPS.index(name), len(STEPS))

        res = mem.sleep(only=only, force=force, wait_s=wait, progress=step)
    emit(res, as_json, lambda: _sleep_text(res))
    if res.get("errors"):
        raise fail("sleep step(s) failed: " + "; ".join(f"{k}: {v}" for k, v in
                                                        res["errors"].items()), _SLEEP_FAILED)


@app.command()
@guarded
def report(
    html: Annotated[Path | None, typer.Option(
        "--html", help="Write a self-contained HTML page with plots to this file.")] = None,
    days: Annotated[int, typer.Option("--days", help="Window of the time series.")] = 30,
    all_scopes: Annotated[bool, typer.Option(
        "--all-scopes", help="Every project's memories and labels, not only the current "
        "project's and global.")] = False,
    store: StoreOpt = None, namespace: NsOpt = None, embedder: EmbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Report growth, gate decisions, recall latency, dynamics, sleeps, hook errors."""
    with opened(store, namespace, embedder) as mem:
        data = mem.report(days=days, all_scopes=all_scopes)
    if html is not None:
        from tideline.archive.paths import atomic_file, safe_target
        from tideline.report.html import render_html

        if not html.name:
            from tideline.errors import InvalidInput

            raise InvalidInput(f"--html needs a file name, got {str(html)!r}")
        # Never through a symlink, never over a device, FIFO or directory; atomically.
        target = safe_target(html)
        page = render_html(data).encode("utf-8")
        try:
            with atomic_file(target) as f:
                f.write(page)
        except OSError as exc:
            raise fail(f"cannot write {target}: {exc}", _WRITE_FAILED) from None
        emit({"html": str(target), "warnings": data["warnings"]}, as_json,
             lambda: f"report written to {target}")
        return
    from tideline.report.text import render_text

    emit(data, as_json, lambda: render_text(data))


@app.command()
@guarded
def heatmap(
    days: Annotated[int, typer.Option("--days", help="Window in days.")] = 30,
    all_scopes: Annotated[bool, typer.Option("--all-scopes", help="Every project.")] = False,
    top: Annotated[int, typer.Option("--top", help="Lit clusters and deserts to list.")] = 10,
    store: StoreOpt = None, namespace: NsOpt = None, scope: ScopeOpt = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Attention heatmap: which memory clusters recall lights up, which are deserts."""
    with opened(store, namespace, embedder, project=scope) as mem:
        data = mem.attention_heatmap(days=days, all_scopes=all_scopes, top=top)

    def text() -> str:
        out = [f"{data['total_hits']} hits in {data['window_days']} days over "
               f"{data['clusters_total']} clusters ({data['lit_count']} lit, "
               f"{data['desert_count']} deserts)"]
        peak = max((c["hits"] for c in data["lit"]), default=1) or 1
        for c in data["lit"]:
            bar = "█" * max(1, round(24 * c["hits"] / peak))
            out.append(f"  #{c['id']:<5} {bar:<24} {c['hits']:>5}  {c['label'] or c['scope']}")
        if data["deserts"]:
            out.append("deserts:")
            out.extend(f"  #{c['id']:<5} size {c['size']:>4}  {c['label'] or c['scope']}"
                       for c in data["deserts"])
        return "\n".join(out)

    emit(data, as_json, text)


@app.command()
@guarded
def scan(
    gap: Annotated[int | None, typer.Option("--gap-minutes", help="Silence that splits "
                                            "a chunk.")] = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns")] = None,
    store: StoreOpt = None, namespace: NsOpt = None, embedder: EmbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Unindexed context: memories without source_links and raw turns not yet solidified."""
    with opened(store, namespace, embedder) as mem:
        res = mem.scan_unindexed(gap_minutes=gap, max_turns=max_turns)
    emit(res.to_dict(), as_json, res.markdown)
