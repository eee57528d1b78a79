"""The report as plain text for a terminal."""

from __future__ import annotations

from typing import Any

__all__ = ["render_text"]


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f} ms"


def render_text(r: dict[str, Any]) -> str:
    """Render a report built by :func:`tideline.report.build.build_report`."""
    t = r["totals"]
    w = r["window"]
    out = [f"Tideline report — {r['store']} [{r['namespace']}] · {r['embedder']}",
           f"window: last {w['days']} days ({w['since']} → {w['until']})", ""]
    if r["warnings"]:
        out.append("WARNINGS")
        out.extend(f"  ! {x}" for x in r["warnings"])
        out.append("")

    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1])) or "—"

    out += ["MEMORY",
            f"  memories {t['memories']}  (+{r['growth']['new_in_window']} in window)  ·  "
            f"raw turns {t['turns']} in {t['sessions']} sessions",
            f"  by kind:   {counts(t['by_kind'])}",
            f"  by scope:  {counts(t['by_scope'])}",
            f"  by status: {counts(t['by_status'])}",
            f"  edges:     {counts(t['edges'])}", ""]
    g = r["gate"]
    out += ["NOVELTY GATE", f"  writes {g['writes']}: " + ", ".join(
        f"{k} {v} ({100 * g['shares'][k]:.0f} %)" for k, v in g["totals"].items())]
    fixes = g.get("corrections", {"count": 0, "latest": []})
    out.append(f"  corrections kept (updates edges): {fixes['count']}")
    out.extend(f"    #{x['new']} updates #{x['old']}: {x['old_text']!r} → {x['new_text']!r}"
               for x in fixes["latest"][:5])
    out.append("")
    rc = r["recall"]
    fb = r["feedback"]
    ratio = fb["reflect_recall_ratio"]
    out += ["RECALL",
            f"  recalls {rc['count']} · abstained {rc['abstained']} "
            f"({100 * rc['abstention_share']:.1f} %) · p50 {_ms(rc['p50_ms'])} · "
            f"p95 {_ms(rc['p95_ms'])}",
            f"  reflects {fb['reflects']} (+{fb['positive']} / −{fb['negative']}) · "
            f"reflect/recall {'—' if ratio is None else f'{ratio:.3f}'}", ""]
    ret = r["retention"]["current"]
    out += ["DYNAMICS",
            f"  retention mean {ret.get('mean', 0):.3f} · p10 {ret.get('p10', 0):.3f} · "
            f"p50 {ret.get('p50', 0):.3f} · dormant {r['fading']['dormant']} · "
            f"near the floor {ret.get('near_floor', 0)}"]
    snaps = r["retention"]["snapshots"]
    if snaps:
        out.append("  across sleeps (mean): " + " → ".join(f"{s['mean']:.3f}" for s in snaps[-8:]))
    out.append("  reinforced in window:")
    out.extend(f"    #{m['id']} ×{m['reinforcements']} ret {m['retention']:.2f}  {m['text']}"
               for m in r["reinforced"]["in_window"][:5])
    if not r["reinforced"]["in_window"]:
        out.append("    —")
    out.append(f"  fading (retention under {r['fading'].get('below', 0.5):.2f}, "
               "not dormant yet):")
    out.extend(f"    #{m['id']} ret {m['retention']:.3f} {m['status']}  {m['text']}"
               for m in r["fading"]["lowest_retention"][:5])
    if not r["fading"]["lowest_retention"]:
        out.append("    — none yet")
    out.append("")
    s = r["sleeps"]
    out += ["SLEEP",
            f"  sleeps {s['count']} (in window {s['in_window']}) · last {s['last'] or '—'}"]
    if s["recent"]:
        last = s["recent"][0]
        out.append(f"  last run {last['ms']} ms: " + ", ".join(
            f"{k} {v:.0f} ms" for k, v in last["steps_ms"].items() if v is not None))
    a = r["associations"]
    out.append(f"  co_recall edges {a['co_recall_edges']}")
    out.extend(f"    #{e['src']} → #{e['dst']} w {e['weight']:.2f}: {e['src_text'][:50]} ⇢ "
               f"{e['dst_text'][:50]}" for e in a["strongest"][:5])
    att = r["attention"]
    out += ["", "ATTENTION",
            f"  hits {att['total_hits']} · clusters {att['clusters_total']} · lit "
            f"{att['lit_count']} · deserts {att['desert_count']}"]
    out.extend(f"    lit    #{c['id']} {c['hits']:>5} hits  {c['label']}" for c in att["lit"][:5])
    out.extend(f"    desert #{c['id']} size {c['size']:>4}  {c['label']}"
               for c in att["deserts"][:5])
    if r["topics"]:
        out.append("  topics: " + ", ".join(f"{x['label']} ({x['size']})"
                                            for x in r["topics"][:10]))
    ents = r["entities"]["nodes"]
    if ents:
        out.append("  entities: " + ", ".join(f"{n['entity']} ({n['mentions']})"
                                              for n in ents[:10]))
    d = r["dream"]
    out += ["", "HOOKS, DREAM, CONTEXT",
            f"  hook errors {r['hooks']['errors']} · dream calls {d['calls']} "
            f"(tokens in {d['tokens_in']}, out {d['tokens_out']}) · memories without "
            f"source_links {r['unindexed']['memories_without_source_links']}"]
    out.extend(f"    {e.get('at')} {e.get('hook', e.get('event', ''))}: "
               f"{str(e.get('error', e.get('message', '')))[:100]}"
               for e in r["hooks"]["recent"][:5])
    return "\n".join(out) + "\n"
