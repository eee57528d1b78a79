"""``python -m tideline.demo``: Tideline's main job, end to end, on a temporary store.

Imports a small multilingual conversation as raw texture, writes free-text and
structured memories (showing the novelty gate's potentiate and link decisions, and
that a retry replays while the same fact stated again later is reinforced),
recalls across two projects and ``global`` (showing an abstention), and follows
a memory's source_links back to the raw turns.
"""

from __future__ import annotations

import json
import tempfile
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from tideline import Memory
from tideline.models import RecallPacket

console = Console(highlight=False)


def _conversation() -> list[dict[str, object]]:
    text = resources.files("tideline.demo").joinpath("conversation.jsonl").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _show(packet: RecallPacket, title: str) -> None:
    table = Table(title=f"{title}\n[dim]{packet.query!r} · scope {packet.scope} + global · "
                  f"{packet.latency_ms:.0f} ms[/dim]", show_lines=False, expand=True)
    table.add_column("conf", justify="right", width=5)
    table.add_column("via", width=8)
    table.add_column("what", ratio=1)
    if packet.abstained:
        table.add_row("—", "—", f"[yellow]abstained[/yellow]: nothing trustworthy "
                      f"(best cosine {packet.best_similarity:.2f})")
    for item in [] if packet.abstained else packet.items[:4]:
        if item.type == "turn":
            where = f"[cyan]turn {item.id}[/cyan] {item.session} · {item.speaker}: "
        else:
            where = f"[green]#{item.id} {item.kind}@{item.scope}[/green] "
        table.add_row(f"{item.confidence:.2f}", item.source, where + " ".join(item.text.split()))
    console.print(table)


def _restate(mem: Memory, text: str) -> None:
    """A retry replays; the same fact stated again later potentiates (spaced reinforcement)."""
    retry = mem.remember(text, kind="preference", source="demo")
    before = mem.get(retry.id).reinforcements
    console.print(f"remember {text!r} again at once → [bold]{retry.decision}[/bold] "
                  f"#{retry.id} replayed={retry.replayed} (a retry: nothing changes)")
    window = mem.config.write_retry_window_s
    real_clock = mem._rt.writer.clock
    # Instead of waiting out the retry window, the demo moves the write path's clock.
    mem._rt.writer.clock = lambda: real_clock() + window + 3600.0
    try:
        later = mem.remember(text, kind="preference", source="demo")
    finally:
        mem._rt.writer.clock = real_clock
    after = mem.get(later.id).reinforcements
    console.print(f"remember {text!r} an hour after the {window:.0f} s retry window → "
                  f"[bold]{later.decision}[/bold] #{later.id} replayed={later.replayed}, "
                  f"reinforcements {before} → {after}")


def main() -> None:
    """Run the demo."""
    with tempfile.TemporaryDirectory(prefix="tideline-demo-") as tmp:
        home = Path(tmp) / "store"
        console.print(Panel.fit("Tideline demo — a memory that wakes up knowing\n"
                                f"store: {home} (embedded SQLite, e5 embedder on CPU)"))
        with Memory.open(home) as mem:
            turns = _conversation()
            by_scope: dict[str, list[dict[str, object]]] = {}
            for t in turns:
                scope = "orchard" if "orchard" in str(t["session"]) else "atlas"
                by_scope.setdefault(scope, []).append(t)
            for scope, rows in by_scope.items():
                res = mem.add_turns(rows, scope=scope, source="demo")
                console.print(f"texture: imported {res.inserted} raw turns into [bold]{scope}"
                              f"[/bold] ({res.sessions} session(s))")
            again = mem.add_turns(by_scope["atlas"], scope="atlas", source="demo")
            console.print(f"texture: re-import is idempotent → {again.inserted} new, "
                          f"{again.skipped} skipped\n")

            links = [t.id for t in mem.store.session_turns("2026-11-20-atlas")
                     if "ATL-5542" in t.text]
            writes = [
                "Mira prefers concise, to-the-point answers.",
                "Mira wants answers to be concise and to the point.",
                "Mira is vegetarian.",
                "Mira is vegetarian and avoids fish as well.",
            ]
            for text in writes:
                wrote = mem.remember(text, kind="preference", source="demo")
                console.print(f"remember {text!r} → [bold]{wrote.decision}[/bold] #{wrote.id}"
                              f" (cos {wrote.similarity:.2f})")
            _restate(mem, "Mira is vegetarian.")
            wrote = mem.write(
                "Atlas nightly load kept failing with psycopg2.OperationalError; we chose to "
                "open the database connection only after the Oracle extract (ATL-5542).",
                context="PostgreSQL 16 behind PgBouncer in transaction mode on pg-atlas-01",
                cognition_direction="idle connections die in the pooler; shorten their life",
                kind="decision", scope="atlas", tags=["atlas", "postgres", "ATL-5542"],
                entities_role="Mira=decides; agent=diagnoses", related_entities=["Mira"],
                source_links=links, importance=4, unresolved=2, source="demo",
                event_time="2026-11-20T09:20:00+01:00",
            )
            console.print(f"write (structured, {len(links)} source_links) → "
                          f"[bold]{wrote.decision}[/bold] #{wrote.id}")
            decision_id = wrote.id
            mem.write("Orchard 2.5 ships on 9 December with Traditional Chinese (zh-TW).",
                      kind="decision", scope="orchard", tags=["orchard", "release"],
                      importance=4, source="demo")
            console.print()

            _show(mem.recall("why did the nightly load break?", scope="atlas"),
                  "project atlas: paraphrase")
            _show(mem.recall("ATL-5542", scope="atlas"), "project atlas: exact token")
            _show(mem.recall("推送通知收不到", scope="orchard"), "project orchard: Chinese")
            _show(mem.recall("Ist Mira Vegetarierin?", scope="orchard"),
                  "project orchard sees global preferences (German query)")
            _show(mem.recall("ATL-5542", scope="orchard"),
                  "project orchard never sees atlas memories")
            _show(mem.recall("what is the boiling point of tungsten?", scope="atlas"),
                  "noise: abstention instead of hallucination")

            rec = mem.show(decision_id, scope="atlas")
            console.print(f"\nsource_links of memory #{decision_id} lead back to the texture:")
            for turn in mem.turns(list(rec["source_links"]), scope="atlas")[:2]:
                console.print(f"  {turn.session} #{turn.turn_index} {turn.speaker}: "
                              f"{turn.text[:90]}")
            info = mem.introspect()
            console.print(Panel.fit(
                f"memories {info['memories']} · turns {info['turns']} · sessions "
                f"{info['sessions']} · edges {info['edges']} · scopes {info['scopes']}\n"
                f"embedder {info['embedder']['marker']} · linked turns of #{decision_id}: "
                f"{len(rec['turns'])}"))
            # The demo's store is temporary; a person's own store is the one to look into.
            console.print("\nSee into your own memory — search it, follow a memory back to "
                          "its conversation, fix it, approve what DREAM wants to change: "
                          "open it with `tideline ui` (`--store DIR` for another store).")


if __name__ == "__main__":
    main()
