"""Cheap token estimates and budget clipping for injected blocks.

No tokenizer is loaded: a hook must stay fast. The estimate counts one token
per CJK (Han, kana, Hangul) character and one per four other characters,
rounded up — close to what BPE tokenizers give for English and Chinese, and
never wildly low.
"""

from __future__ import annotations

import re

__all__ = ["clip_lines", "clip_text", "estimate_tokens"]

# Ranges in ascending order: the regex compiler builds this class several times faster.
_CJK = re.compile(
    "[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f]"
)


def estimate_tokens(text: str) -> int:
    """Estimate the token count of ``text`` (CJK: 1 per character, others: ~len/4)."""
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    other = len(text) - cjk
    return cjk + (other + 3) // 4


def clip_text(text: str, tokens: int) -> str:
    """Cut ``text`` to at most ``tokens`` estimated tokens, marking the cut with ``…``."""
    if tokens <= 0:
        return ""
    if estimate_tokens(text) <= tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid]) + 1 <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip() + "…" if lo else ""


def clip_lines(lines: list[str], tokens: int) -> tuple[list[str], bool]:
    """Keep whole lines, in order, while they fit ``tokens``; returns (kept, clipped?).

    The first line that does not fit is cut to the remaining budget when at
    least a few tokens remain, so a long single item still shows its start.
    """
    kept: list[str] = []
    used = 0
    for pos, line in enumerate(lines):
        cost = estimate_tokens(line) + 1  # the newline
        if used + cost <= tokens:
            kept.append(line)
            used += cost
            continue
        room = tokens - used - 1
        if room >= 12:
            kept.append(clip_text(line, room))
        return kept, pos < len(lines)
    return kept, False
