"""The retention curve, simulated with the real dynamics and plotted as SVG.

``python -m tideline.sleep.curve docs/retention.svg`` regenerates the figure in
the docs from the current :class:`~tideline.config.Dynamics` defaults. The
curves run :func:`tideline.dynamics.reinforce` itself, so the plot cannot drift
from the code.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from tideline.config import Dynamics
from tideline.dynamics import DAY, reinforce, retention
from tideline.models import MemoryRecord

__all__ = ["curves", "main", "svg"]

_HOUR = 3600.0


def _simulate(dyn: Dynamics, at: Sequence[float], days: int, step: float) -> list[
        tuple[float, float]]:
    rec = MemoryRecord(id=0, scope="global", kind="episode", gesture="",
                       stability=dyn.episodic_half_life_days, last_access=0.0)
    events = sorted(at)
    out: list[tuple[float, float]] = []
    t = 0.0
    while t <= days + 1e-9:
        while events and events[0] <= t * DAY:
            rec = reinforce(rec, events.pop(0), dyn)
        out.append((round(t, 3), round(retention(rec, t * DAY, dyn), 4)))
        t += step
    return out


def curves(dyn: Dynamics | None = None, days: int = 120,
           step: float = 0.5) -> dict[str, list[tuple[float, float]]]:
    """Retention over ``days`` for typical reinforcement histories.

    Returns:
        Series name → [(day, retention)].
    """
    d = dyn or Dynamics()
    return {
        "never reinforced (episodic)": _simulate(d, [], days, step),
        "2× massed (day 2, +1 h)": _simulate(d, [2 * DAY, 2 * DAY + _HOUR], days, step),
        "2× spaced (days 2, 9)": _simulate(d, [2 * DAY, 9 * DAY], days, step),
        "3× spaced → semantic (days 2, 9, 23)": _simulate(d, [2 * DAY, 9 * DAY, 23 * DAY],
                                                          days, step),
    }


def svg(dyn: Dynamics | None = None, days: int = 120) -> str:
    """The retention-curve figure as an SVG document."""
    from tideline.report.svg import lines

    d = dyn or Dynamics()
    return lines("retention-curves",
                 f"Retention: half-life {d.episodic_half_life_days:g} d, ×{d.stability_growth:g} "
                 f"per spaced reinforcement, semantic ≥ {d.semantic_half_life_days:g} d",
                 curves(d, days), x_label="days since written", y_label="retention",
                 y_max=1.0, hline=(d.dormant_below, f"dormant below {d.dormant_below:g}"),
                 width=760, height=300)


def main(argv: Sequence[str] | None = None) -> None:
    """Write the figure to the path given (default ``retention.svg``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    target = Path(args[0] if args else "retention.svg")
    target.write_text('<?xml version="1.0" encoding="UTF-8"?>\n' + svg() + "\n",
                      encoding="utf-8")
    print(target)


if __name__ == "__main__":
    main()
