"""Does a new text say the same thing as a stored one? The gate's evidence beyond the cosine.

An embedding sees "The cache TTL is five minutes" and "… ten minutes" as near-identical
(cosine 0.96), "Use tabs …" and "Use spaces …" too, and two long texts whose first 512
tokens agree as identical (the tail is past the model's window). Potentiating one into
the other would drop the new statement. :func:`compare` reads both *whole* texts and
tells what differs:

* the **hard slots**: numbers (digits and number words — five/fünf/五, twice, 十二 — so
  "5" and "five" are the same value), identifiers (``ATL-5542``, ``v1.2``,
  ``qwen2.5:14b``), versions, dates, and names (a capital inside a sentence);
* the **polarity**: how many negations each holds (not/never/no/n't/without/instead;
  nicht/nie/kein/ohne/statt; 不/没/别/未/无…; не/нет/никогда) — "happen" and "never
  happen" differ;
* the **wording**: the two texts' content words in order (stopwords and fillers out,
  Snowball stems for English and German, jieba words for Chinese, numbers as their
  value, a negation as one marker), aligned with :class:`difflib.SequenceMatcher`.

Its verdict (:class:`Contrast`):

* ``same`` — nothing the new text says is missing from the old one: a restatement, a
  paraphrase with the same slots and polarity, or a shorter form;
* ``correction`` — the same sentence (most content words aligned, in order, one stretch
  edited) with a different value in one place: a slot or up to :data:`SLOT_WORDS` words
  replaced, or the polarity flipped; or reworded around the value (the polarity flipped
  or one slot replaced, and at most :data:`REWORDED` stretches edited: "reviews … every
  Friday" → "never reviews … on Friday");
* ``conflict`` — worded differently, and the slots or the polarity disagree, or one
  sentence with a whole clause replaced: possibly a correction, possibly another fact;
  never a restatement;
* ``detail`` — the new text adds something (a word in the same sentence, a slot value)
  and replaces nothing.

:func:`linkable` tells whether two texts share enough content for a link, each shared
word weighed by how much it says (:func:`weight`): :data:`LINK_SHARED` words' worth and
:data:`LINK_OVERLAP` of the shorter text's. A Chinese person's name, a number, a
one-character Chinese word (次, 点) or a common Chinese word (负责, 报告) counts for less
than a full word, so two unrelated facts that embed close — two short Chinese sentences
at cosine 0.886, or
"赵磊这个季度负责orchard的值班" / "赵磊负责审核quarry的发布" (one person, one common
verb) — stay apart, while two facts that share their topic words still link.
"""

from __future__ import annotations

import difflib
import functools
import re
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from tideline import text as lexical

__all__ = ["ALIGNED", "LINK_OVERLAP", "LINK_SHARED", "MAX_ALIGN", "REWORDED", "SLOT_WORDS",
           "Contrast", "Verdict", "compare", "linkable", "overlap", "restates", "weight"]

Verdict = Literal["same", "correction", "conflict", "detail"]

ALIGNED = 0.6
"""Share of the longer text's content words that must align, in order, for two texts to be
one sentence edited (a correction) rather than two wordings."""
REWORDED = 2
"""Most stretches a correction edits: the changed value (a slot, the polarity) and one
other stretch reworded around it; more is another statement."""
MAX_ALIGN = 1_000
"""Most content words (both texts' differing middles together) aligned word by word."""
SLOT_WORDS = 3
"""Most content words a correction replaces on either side (and at most a third of the
text): "disk full" → "an expired certificate"; a longer stretch is another statement."""
LINK_OVERLAP = 0.2
"""Share of the shorter text's content (by :func:`weight`) the other must hold for the gate
to link them."""
LINK_SHARED = 2.0
"""Content two texts must share (by :func:`weight`, besides :data:`LINK_OVERLAP`) for a
link: one common word ("测试", "server") is no relation, nor a person and a common verb
(赵磊, 负责)."""
SLOT_WEIGHT = 0.5
"""Weight of a shared name or number: one person or one value in common says the facts
are about the same thing, not that one continues the other."""
COMMON_WEIGHT = 0.5
"""Weight of a common Chinese word (负责, 报告, 任务: more than :data:`COMMON_SHARE` of
jieba's dictionary counts)."""
COMMON_SHARE = 1e-4
"""Dictionary share above which a Chinese word is common (负责 2.3e-4, 审核 1.7e-5)."""
RESTATE_SHARE = 0.5
"""Share of the shorter text's weight two wordings with the same slots must have in
common to restate each other when they do not share :data:`LINK_SHARED` words' worth."""
CHAR_WEIGHT = 0.25
"""Weight of a one-character Chinese word (次, 点, 天): a measure word or a particle."""
NEGATION = "¬"
"""The one marker every negation word becomes in the content sequence."""

_NEG_EN = frozenset("""not no never none nobody nothing neither nor nowhere cannot without
instead""".split())
_NEG_DE = frozenset("""nicht nie niemals kein keine keinen keinem keiner keines nichts ohne
weder nirgends statt anstatt""".split())
_NEG_RU = frozenset("не нет никогда ни без вместо".split())
_NEG_WORDS = _NEG_EN | _NEG_DE | _NEG_RU
_NEG_ZH_START = tuple("不没沒别別未无無勿莫甭")
_NEG_ZH_WORDS = frozenset("非 并非 毫无 从不 从未 永不 绝不 决不 而非".split())
# Words that start with a negating character but do not negate.
_NEG_ZH_NOT = frozenset("""不过 不错 不仅 不但 不断 不同 不少 不久 不管 不论 不如 未来 无论 无线
无数 无限 别人 别的 别处 没错 无疑 不得不 不禁""".split())

# Words a restatement may add or drop without saying anything new.
_FILLERS = frozenset("""remember reminder note notes fyi again also always really actually
basically indeed just still please keep mind recall
erinnerung hinweis merke merken bitte nochmal nochmals übrigens immer wirklich eigentlich
提醒 注意 记住 请 再次 一下 还是 总是 其实 真的 再说 每个 每天 这个""".split())

_EN_NUMBERS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
    "million": 10**6, "billion": 10**9, "dozen": 12, "twice": 2, "thrice": 3, "half": 0.5,
}
_DE_NUMBERS = {
    "null": 0, "eins": 1, "zwei": 2, "drei": 3, "vier": 4, "fünf": 5, "sechs": 6,
    "sieben": 7, "acht": 8, "neun": 9, "zehn": 10, "elf": 11, "zwölf": 12, "dreizehn": 13,
    "vierzehn": 14, "fünfzehn": 15, "sechzehn": 16, "siebzehn": 17, "achtzehn": 18,
    "neunzehn": 19, "zwanzig": 20, "dreißig": 30, "vierzig": 40, "fünfzig": 50,
    "sechzig": 60, "siebzig": 70, "achtzig": 80, "neunzig": 90, "hundert": 100,
    "tausend": 1000, "zweimal": 2, "dreimal": 3, "halb": 0.5, "halbe": 0.5,
}
_WORD_NUMBERS = _EN_NUMBERS | _DE_NUMBERS
_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6,
              "七": 7, "八": 8, "九": 9}
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10**4, "亿": 10**8}
_ZH_NUMERAL = re.compile("^[零〇一二两三四五六七八九十百千万亿]+")
# Han words that start with a numeral and are not numbers.
_ZH_NOT_NUMBER = frozenset("""一起 一样 一直 一定 一般 一共 一些 一下 一切 一点 一边 一旦 一致 统一
唯一 万一 一再 一向 一律 一同 一面 一番 一方面 一时 一度 一味 一贯 一心 一眼 一口气 一下子 一会儿
一部分 三思 十分 万分 千万 百分之百""".split())
_NUMBER = re.compile(r"^\d+(?:[.,]\d+)?$")
# A token: a run of word characters with inner punctuation (identifiers, versions,
# dates, times, contractions, decimal commas) and a trailing ``+`` (c++).
_TOKEN = re.compile(r"\w(?:\w|['’](?=\w)|[.\-:/@#+_](?=\w)|(?<=\d),(?=\d))*\+*")
# An identifier holds a digit or inner punctuation other than a hyphen (v1.2, a_b, x/y).
_IDENTIFIER = re.compile(r"\d|.[_./:@#+]")
_CYRILLIC = re.compile("[\u0400-\u04ff]")
_INNER_CAPITAL = re.compile(r"[a-z][A-Z]")  # pgBackRest, iOS
_JOINERS = ".-:/@#+_,'’"  # inner punctuation left at the edge of a part beside CJK
_SENTENCE_END = frozenset(".!?。！？:;\n")
_GERMAN_HINTS = frozenset("""der die das den dem des ein eine einen ist sind war und oder nicht
mit für auf von zu ich du er sie wir ihr hat haben wird werden bei nach seit ohne""".split())

# Common Chinese family names (and the compound ones): a two- or three-character word
# that starts with one and is rare in jieba's dictionary is most likely a person.
_ZH_SURNAMES = frozenset("""王 李 张 刘 陈 杨 黄 赵 吴 周 徐 孙 马 朱 胡 郭 何 高 林 罗 郑 梁 谢 宋
唐 许 韩 冯 邓 曹 彭 曾 肖 田 董 袁 潘 于 蒋 蔡 余 杜 叶 程 苏 魏 吕 丁 任 沈 姚 卢 姜 崔 钟 谭
陆 汪 范 金 石 廖 贾 夏 韦 付 方 白 邹 孟 熊 秦 邱 江 尹 薛 闫 段 雷 侯 龙 史 陶 黎 贺 顾 毛 郝 龚
邵 万 钱 严 覃 武 戴 莫 孔 向 汤 欧阳 司马 上官 诸葛 东方 皇甫""".split())
_ZH_NAME_SHARE = 2e-5
"""Dictionary share under which a surname-initial word is taken for a name (李娜 7e-6)."""

_stem_lock = threading.Lock()
_stemmers: dict[str, Any] = {}


def _stemmer(lang: str) -> Any:
    """The Snowball stemmer of ``english``, ``german`` or ``russian``, made once."""
    if lang not in _stemmers:
        with _stem_lock:
            if lang not in _stemmers:
                import Stemmer

                _stemmers[lang] = Stemmer.Stemmer(lang)
    return _stemmers[lang]


@dataclass(frozen=True)
class _Token:
    raw: str
    fold: str
    initial: bool  # first word of a sentence (a capital there is no name)
    cjk: bool


@dataclass(frozen=True)
class _Reading:
    """One text as the gate compares it."""

    seq: tuple[str, ...]
    """Content words in order: stems, ``#value`` for numbers, :data:`NEGATION`."""
    numbers: dict[str, tuple[str, ...]]
    """Number values (``#5``) and the digit forms they were written in."""
    identifiers: tuple[str, ...]
    names: tuple[tuple[str, str], ...]
    """Capitalised words inside a sentence: (word, stem)."""
    negations: int
    folded: str


@dataclass(frozen=True)
class Contrast:
    """What tells a new text from a stored one (see the module's docstring).

    Attributes:
        verdict: ``same``, ``correction``, ``conflict`` or ``detail``.
        old: what the stored text says that the new one does not (for the journal).
        new: what the new text says that the stored one does not.
        aligned: share of the longer text's content words aligned in order.
        polarity: the two texts hold different numbers of negations.
    """

    verdict: Verdict
    old: tuple[str, ...] = ()
    new: tuple[str, ...] = ()
    aligned: float = 1.0
    polarity: bool = False

    def summary(self) -> dict[str, Any]:
        """JSON-ready form for the journal (at most 8 words a side)."""
        return {"verdict": self.verdict, "old": list(self.old[:8]), "new": list(self.new[:8]),
                "aligned": round(self.aligned, 3), "polarity": self.polarity}


def _tokens(text: str) -> list[_Token]:
    """The words of ``text``: Latin/Cyrillic tokens whole, CJK runs cut by jieba."""
    cleaned = lexical.clean_words(text)
    out: list[_Token] = []
    for match in _TOKEN.finditer(cleaned):
        i = match.start() - 1
        while i >= 0 and cleaned[i] in " \t\r\f\v":
            i -= 1
        initial = i < 0 or cleaned[i] in _SENTENCE_END
        word = match.group()
        if not lexical.has_cjk(word):
            out.append(_Token(word, word.casefold(), initial, cjk=False))
            continue
        pos = 0
        for seg in lexical.CJK_SEGMENT.finditer(word):
            rest = word[pos : seg.start()].strip(_JOINERS)  # "注意：meadow" → meadow
            if rest:
                out.append(_Token(rest, rest.casefold(), initial and pos == 0, cjk=False))
            parts = lexical.cut(seg.group()) if seg.group("han") else [seg.group()]
            out.extend(_Token(p, p, False, cjk=True) for p in parts)
            pos = seg.end()
        rest = word[pos:].strip(_JOINERS)
        if rest:
            out.append(_Token(rest, rest.casefold(), False, cjk=False))
    return out


def _zh_number(word: str) -> float | None:
    """The value of a Han numeral at the start of ``word`` (五, 十二, 两个, 六点半), if any."""
    if word in _ZH_NOT_NUMBER:
        return None
    match = _ZH_NUMERAL.match(word)
    if match is None:
        return None
    total, section, digit = 0, 0, 0
    for ch in match.group():
        if ch in _ZH_DIGITS:
            digit = _ZH_DIGITS[ch]
        elif ch in ("万", "亿"):
            total += (section + digit) * _ZH_UNITS[ch]
            section, digit = 0, 0
        else:
            section += (digit or 1) * _ZH_UNITS[ch]
            digit = 0
    value: float = total + section + digit
    if word[match.end():].startswith(("点半", "半")):
        value += 0.5
    return value


def _number(token: _Token) -> str | None:
    """The canonical value of a number token (``#5`` for 5, five, fünf, 五), else None."""
    value: float | None
    if _NUMBER.match(token.fold):
        value = float(token.fold.replace(",", "."))
    elif token.cjk:
        value = _zh_number(token.fold)
    else:
        value = _WORD_NUMBERS.get(token.fold)
    if value is None:
        return None
    return f"#{value:g}"


def _negates(token: _Token) -> bool:
    word = token.fold.replace("’", "'")
    if token.cjk:
        return (word in _NEG_ZH_WORDS
                or (word.startswith(_NEG_ZH_START) and word not in _NEG_ZH_NOT))
    return word in _NEG_WORDS or word.endswith("n't")


def _plain(fold: str) -> str:
    """A word without its possessive ending (Mira's → mira)."""
    return re.sub(r"['’]s$", "", fold)


def _language(text: str) -> str:
    words = set(text.casefold().split())
    return "german" if len(words & _GERMAN_HINTS) >= 2 or re.search("[äöüß]", text) else "english"


@functools.lru_cache(maxsize=1024)
def _read(text: str, lang: str) -> _Reading:
    seq: list[str] = []
    numbers: dict[str, tuple[str, ...]] = {}
    identifiers: list[str] = []
    names: list[tuple[str, str]] = []
    negations = 0
    stem = _stemmer(lang).stemWord
    # Cyrillic words take the Russian stems whatever the text's Latin language
    # (бабушка / бабушке, велосипед / велосипеду are one word, as Tuesday / Tuesdays are).
    stem_ru = _stemmer("russian").stemWord if _CYRILLIC.search(text) else stem
    for token in _tokens(text):
        if _negates(token):
            negations += 1
            seq.append(NEGATION)
            continue
        number = _number(token)
        if number is not None:
            digits = (token.fold,) if token.fold[:1].isdigit() else ()
            numbers[number] = numbers.get(number, ()) + digits
            seq.append(number)
            unit = _ZH_NUMERAL.sub("", token.fold) if token.cjk else ""
            if len(unit) > 1 or (unit and unit not in "点半"):  # 五分钟 → 5, 分钟 (as 5 分钟)
                seq.append(unit.removeprefix("点半").removeprefix("半") or unit)
            continue
        fold = _plain(token.fold)
        parts = [fold]
        if not token.cjk:
            if _IDENTIFIER.search(fold) or _INNER_CAPITAL.search(token.raw):
                identifiers.append(fold)
            else:
                # A hyphenated word is words (rate-limited, Pre-Commit-Hook), not a code.
                parts = [p for p in fold.split("-") if p]
                if not token.initial and token.raw[:1].isupper():
                    names.append((fold, str((stem_ru if _CYRILLIC.search(fold)
                                             else stem)(fold))))
        for part in parts:
            if part in lexical.STOPWORDS or part in _FILLERS or not any(c.isalnum() for c in part):
                continue
            if token.cjk:
                seq.append(part)
            else:
                seq.append(str((stem_ru if _CYRILLIC.search(part) else stem)(part)))
    return _Reading(seq=tuple(seq), numbers=numbers, identifiers=tuple(identifiers),
                    names=tuple(names), negations=negations,
                    folded=lexical.clean_words(text).casefold())


def _readings(new: str, old: str) -> tuple[_Reading, _Reading]:
    lang = _language(f"{new}\n{old}")
    return _read(new, lang), _read(old, lang)


def _slots(a: _Reading, b: _Reading) -> list[str]:
    """The hard slot values of ``a`` that ``b`` lacks.

    A number counts as held when ``b`` has the value (``5`` and ``five``) or the digits
    as a word (``10`` in ``10:00``); a name or identifier when ``b`` holds it as a
    substring (``Atlas-Repo`` in ``Atlas-Repository``, as the gate always did) or as a
    stem (``Tuesdays``, ``Tuesday``): a slot *replaced* inside one sentence is caught by
    the alignment instead.
    """
    out = [n for n, forms in sorted(a.numbers.items()) if n not in b.numbers
           and not any(lexical.contains_term(b.folded, f) for f in forms)]
    stems = set(b.seq)
    for word, stem in [*((i, i) for i in a.identifiers), *a.names]:
        if word not in out and word not in b.folded and stem not in stems:
            out.append(word)
    return out


def _align(old: tuple[str, ...],
           new: tuple[str, ...]) -> tuple[float, list[str], list[str], int]:
    """Align two content sequences: the share of the longer one aligned in order, the
    words really removed and added (not moved), and how many stretches differ.

    The common head and tail are cut off first (two long texts that differ at the end
    cost a comparison of their ends); a middle longer than :data:`MAX_ALIGN` words on
    both sides is not aligned (``SequenceMatcher`` is quadratic there) but counted as
    two wordings: what differs is found by counts, and only the head and tail align.
    """
    longest = max(len(old), len(new), 1)
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    mid_old, mid_new = old[head:len(old) - tail], new[head:len(new) - tail]
    # A word is moved, not replaced, when the other text holds it as often (counts: a
    # number changed in a text that holds the old value elsewhere too is still a change).
    in_new, in_old = Counter(new), Counter(old)
    removed: list[str] = []
    added: list[str] = []
    if len(mid_old) + len(mid_new) > MAX_ALIGN:
        removed = list(dict.fromkeys(w for w in mid_old if in_old[w] > in_new[w]))
        added = list(dict.fromkeys(w for w in mid_new if in_new[w] > in_old[w]))
        return (head + tail) / longest, removed, added, 2
    matcher = difflib.SequenceMatcher(None, mid_old, mid_new, autojunk=False)
    aligned = head + tail + sum(m.size for m in matcher.get_matching_blocks())
    regions = 0  # stretches where a word was really replaced, added or dropped (not moved)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        gone = [w for w in mid_old[i1:i2] if in_old[w] > in_new[w]]
        came = [w for w in mid_new[j1:j2] if in_new[w] > in_old[w]]
        regions += bool(gone or came)
        removed += [w for w in gone if w not in removed]
        added += [w for w in came if w not in added]
    return aligned / longest, removed, added, regions


def compare(new: str, old: str) -> Contrast:
    """Tell how ``new`` differs from the stored ``old`` (see the module's docstring).

    Args:
        new: the text being written.
        old: the stored memory's text.

    Returns:
        The verdict and what differs.
    """
    a, b = _readings(new, old)
    added_slots, removed_slots = _slots(a, b), _slots(b, a)
    aligned, removed, added, regions = _align(b.seq, a.seq)
    old_side = tuple(dict.fromkeys([*removed_slots, *removed]))
    new_side = tuple(dict.fromkeys([*added_slots, *added]))
    polarity = a.negations != b.negations
    if polarity and NEGATION not in old_side + new_side:
        old_side += (NEGATION * b.negations,)
        new_side += (NEGATION * a.negations,)
    verdict: Verdict
    longest = max(len(a.seq), len(b.seq), 1)
    stretch = max(len(removed), len(added))
    if aligned >= ALIGNED and regions <= 1:  # one sentence with one stretch edited
        if polarity or (removed_slots and added_slots) or (
                removed and added and stretch <= SLOT_WORDS and 3 * stretch <= longest):
            verdict = "correction"
        elif removed and added:  # a whole clause replaced: another statement
            verdict = "conflict"
        elif added or added_slots:
            verdict = "detail"
        else:
            verdict = "same"
    elif (aligned >= ALIGNED and regions <= REWORDED and stretch <= SLOT_WORDS
          and 3 * stretch <= longest
          and (polarity or (len(removed_slots) == 1 and len(added_slots) == 1))):
        # The same sentence, its value changed and a word or two around it reworded
        # ("reviews … every Friday" → "never reviews … on Friday", "会重试七次" → "不会重试"):
        # still one statement corrected, not another fact.
        verdict = "correction"
    # Worded differently: a negation where the other has none, or a slot replaced.
    elif (bool(a.negations) != bool(b.negations)) or (removed_slots and added_slots):
        verdict = "conflict"
    elif added_slots:
        verdict = "detail"
    else:
        verdict = "same"
    return Contrast(verdict=verdict, old=old_side, new=new_side, aligned=aligned,
                    polarity=polarity)


def overlap(new: str, old: str) -> float:
    """Share of the shorter text's content words (numbers as values) the other holds.

    Args:
        new: one text.
        old: the other.

    Returns:
        0–1 (0 when either has no content word).
    """
    a, b = _readings(new, old)
    sa, sb = set(a.seq) - {NEGATION}, set(b.seq) - {NEGATION}
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / min(len(sa), len(sb))


def _zh_name(word: str) -> bool:
    """A Chinese word that looks like a person's name: a family name and one or two
    characters, rare in (or absent from) jieba's dictionary."""
    if not 2 <= len(word) <= 4 or not word.isalpha():
        return False
    family = word[:2] if word[:2] in _ZH_SURNAMES else word[:1]
    return (family in _ZH_SURNAMES and 1 <= len(word) - len(family) <= 2
            and lexical.word_share(word) < _ZH_NAME_SHARE)


def _split_names(seq: tuple[str, ...]) -> set[str]:
    """Names jieba cut in two: a family name alone (欧阳) and the given name after it."""
    out: set[str] = set()
    for word, after in zip(seq, seq[1:], strict=False):
        if word in _ZH_SURNAMES and lexical.has_cjk(after) and 1 <= len(after) <= 2:
            out.update((word, after))
    return out


def weight(word: str, reading_names: frozenset[str] = frozenset()) -> float:
    """How much one content word of a reading says, for :func:`linkable` (0–1).

    Args:
        word: a content word as the gate reads it (a stem, a jieba word, ``#5``).
        reading_names: words the texts hold as persons' names.

    Returns:
        :data:`SLOT_WEIGHT` for a number or a person's name (one of ``reading_names``, or
        a Chinese family name and given name), :data:`CHAR_WEIGHT` for a one-character
        Chinese word,
        :data:`COMMON_WEIGHT` for a common Chinese word, 1 otherwise.
    """
    if word.startswith("#") or word in reading_names:
        return SLOT_WEIGHT
    if lexical.has_cjk(word):
        if len(word) == 1:
            return CHAR_WEIGHT
        if _zh_name(word):
            return SLOT_WEIGHT
        if lexical.word_share(word) > COMMON_SHARE:
            return COMMON_WEIGHT
    return 1.0


def linkable(new: str, old: str) -> bool:
    """Whether two close texts share enough content for the gate to link them.

    Each content word is weighed by :func:`weight`: a shared person and a common verb
    (赵磊, 负责), a person and a measure word (刘洋, 次) or a person and a number
    (Priya, 7) are not enough.

    Args:
        new: one text.
        old: the other.

    Returns:
        True when the words they share weigh :data:`LINK_SHARED` or more (or all of the
        shorter text, if it weighs less), and at least :data:`LINK_OVERLAP` of the
        shorter one's.
    """
    shared, wa, wb = _weighed(new, old)
    if not wa or not wb:
        return False
    return shared >= min(LINK_SHARED, wa, wb) and shared / min(wa, wb) >= LINK_OVERLAP


def _weighed(new: str, old: str) -> tuple[float, float, float]:
    """The weight (:func:`weight`) of the content words two texts share, and of each's."""
    lang = _language(f"{new}\n{old}")
    a, b = _read(new, lang), _read(old, lang)
    sa, sb = set(a.seq) - {NEGATION}, set(b.seq) - {NEGATION}
    # German capitalises every noun: a capital there is no name.
    # A capital inside a sentence is no person in German (every noun has one), nor, in
    # English, often (Expo, Airflow, NUC: a product, the topic): only Chinese names, told
    # by their family name, weigh as a person.
    names = frozenset(_split_names(a.seq) | _split_names(b.seq))
    wa = sum(weight(w, names) for w in sa)
    wb = sum(weight(w, names) for w in sb)
    return sum(weight(w, names) for w in sa & sb), wa, wb


def restates(new: str, old: str, contrast: Contrast) -> bool:
    """Whether ``new`` says again what ``old`` says (the gate may potentiate).

    A ``same`` verdict on one sentence (its words aligned) restates; a ``same`` verdict on
    two wordings (no slot or polarity differs) only when they share their content
    (:func:`linkable`, or :data:`RESTATE_SHARE` of the shorter one's weight):
    "刘洋这个季度负责beacon的值班" does not restate
    "刘洋负责审核atlas的发布" however close their vectors.

    Args:
        new: the text being written.
        old: the stored text.
        contrast: ``compare(new, old)``.

    Returns:
        True when a potentiation keeps everything ``new`` says.
    """
    if contrast.verdict != "same":
        return False
    if contrast.aligned >= ALIGNED or linkable(new, old):
        return True
    # A short paraphrase shares few words, but most of what it says
    # (她特别能吃辣，不过香菜一点都不碰 / 她很能吃辣，但是完全不吃香菜: 1.75 of 2.75).
    shared, wa, wb = _weighed(new, old)
    return bool(wa and wb) and shared / min(wa, wb) >= RESTATE_SHARE
