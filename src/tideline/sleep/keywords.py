"""Content words of a memory: jieba POS keywords for Chinese, a plain tokenizer for the rest.

Chinese runs are segmented with jieba and kept when jieba tags them as a noun,
verb or adjective (``n*``, ``v*``, ``a*``) and they have two characters or more.
By default the tag comes from jieba's dictionary (the table
``jieba.posseg`` itself starts from), which is ten times faster than running
``posseg``'s HMM over every sentence; words jieba discovers that are not in its
dictionary are kept as nouns when they have two characters or more. Set
``SleepTuning.topic_exact_pos`` to tag with ``jieba.posseg`` itself.

Everything else (English, German, Russian, …) has no POS tagger here: words
that start with a letter, three characters or more, that are not stopwords,
stand in for nouns, verbs and adjectives — the document-frequency filter of the
topic step removes what is left of the noise. Kana and hangul runs are kept
whole. A memory's tags count as keywords too.

jieba is imported only when a text holds Han characters.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
import warnings
from collections import Counter
from collections.abc import Iterable
from typing import Any

__all__ = ["extract", "memory_text", "stopwords"]

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]+")
_KANA_HANGUL = re.compile(r"[\u3041-\u3096\u30a1-\u30fa\u30fc-\u30ff\uac00-\ud7a3]{2,}")
_WORD = re.compile(r"[^\W\d_](?:[\w'’\-]*[^\W_])?")
_KEEP_TAGS = ("n", "v", "a")

_STOP = """
a about above after again against all almost also although always am among an and another
any anyone anything are around as at away back be because been before being below between
both but by came can cannot come could did do does doing done down during each either else
even ever every few for from further get gets getting give given go goes going gone got had
has have having he her here hers him his how however i if in into is it its just keep kept
know last least less let like made make makes making many may me might more most much must
my near need needs never new next no nor not now of off often on once one only onto or other
others our out over own per perhaps put quite rather really said same say says see seem seems
set several shall she should show since so some something still such take than that the their
them then there these they thing things this those though through thus to too took toward
under until up upon us use used uses using very via want was way we well went were what when
where whether which while who whom whose why will with within without would yes yet you your
yours
aber alle allem allen aller alles als also am an andere anderen auch auf aus bei beim bin bis
bist da dabei damit dann das dass dein deine dem den denn der des dich die dies diese diesem
diesen dieser dieses dir doch dort du durch ein eine einem einen einer eines einmal er es etwa
etwas euch euer eure für gegen gibt hab habe haben hat hatte hatten hier hin ich ihm ihn ihnen
ihr ihre im immer in ist ja jede jedem jeden jeder jedes jetzt kann kein keine können man mehr
mein meine mich mir mit muss müssen nach nicht nichts noch nun nur ob oder ohne schon sehr
sein seine sich sie sind so solche soll sollte sondern sowie über um und uns unser unsere
unter viel vom von vor war waren warum was weg weil welche welchem welchen welcher welches
wenn wer werde werden wie wieder will wir wird wo wollen wurde wurden zu zum zur zwischen
а без более бы был была были было быть в вам вас весь во вот все всего всех вы где да даже
для до его ее её ей если есть еще ещё же за здесь и из или им их к как какая какой когда кто
ли либо мне много может мы на над надо не него нее неё нет ни них но ну о об однако он она
они оно от очень по под при с со так также такой там те тем то того тоже той только том ты
у уже хотя чего чей чем что чтобы чье чья эта эти это этого этой этом этот я
的 了 是 在 和 与 及 或 也 都 就 而 之 其 这 那 这个 那个 一个 我 你 他 她 它 我们 你们 他们
吗 呢 吧 啊 呀 么 什么 怎么 如何 哪 哪个 有 没 没有 不 被 把 给 对 从 向 于 以 为 着 过 地 得
个 些 很 还 又 请 让 觉得 知道 可以 需要 现在 时候 自己 已经 因为 所以 但是 然后 就是 还是
进行 出来 起来 东西 事情 问题 这样 那样 一些 一下 一直 可能 应该 发现 开始 成为 表示
"""
_STOPWORDS = frozenset(_STOP.split())

_jieba: Any = None
_tags: dict[str, str] | None = None
_lock = threading.Lock()


def stopwords() -> frozenset[str]:
    """The casefolded stopwords (English, German, Russian, Chinese) keywords never use."""
    return _STOPWORDS


def _load() -> tuple[Any, dict[str, str]]:
    global _jieba, _tags
    if _jieba is None or _tags is None:
        with _lock:
            if _jieba is None or _tags is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    import jieba
                    import jieba.posseg

                    jieba.setLogLevel(logging.WARNING)
                    jieba.initialize()
                _tags = dict(jieba.posseg.dt.word_tag_tab)
                _jieba = jieba
    return _jieba, _tags


def _han_words(run: str, exact: bool) -> Iterable[str]:
    jieba, tags = _load()
    if exact:
        import jieba.posseg as pseg

        pairs = [(p.word, p.flag) for p in pseg.lcut(run)]
    else:
        pairs = [(w, tags.get(w, "")) for w in jieba.lcut(run)]
    for word, flag in pairs:
        if len(word) < 2 or word in _STOPWORDS:
            continue
        if not flag or flag.startswith(_KEEP_TAGS):
            yield word


def extract(text: str, tags: Iterable[str] = (), *, exact_pos: bool = False) -> dict[str, int]:
    """Keywords of one text with their counts.

    Args:
        text: the memory's text (gesture, context, direction).
        tags: the memory's tags (each counts once, casefolded).
        exact_pos: tag Chinese with ``jieba.posseg`` (slow) instead of the dictionary.

    Returns:
        ``{keyword: count}``.
    """
    norm = unicodedata.normalize("NFKC", text).casefold()
    counts: Counter[str] = Counter()
    pos = 0
    for m in _HAN.finditer(norm):
        _latin(norm[pos:m.start()], counts)
        counts.update(_han_words(m.group(), exact_pos))
        pos = m.end()
    _latin(norm[pos:], counts)
    for tag in tags:
        t = unicodedata.normalize("NFKC", tag).casefold().strip()
        if t and t not in _STOPWORDS:
            counts[t] += 1
    return dict(counts)


def _latin(text: str, counts: Counter[str]) -> None:
    if not text:
        return
    for m in _KANA_HANGUL.finditer(text):
        counts[m.group()] += 1
    for m in _WORD.finditer(text):
        w = m.group().strip("'’-")
        if w.endswith(("'s", "’s")):
            w = w[:-2]
        if len(w) >= 3 and w not in _STOPWORDS and not _KANA_HANGUL.fullmatch(w):
            counts[w] += 1


def memory_text(gesture: str, context: str, direction: str) -> str:
    """The text of a memory that keywords are drawn from."""
    return "\n".join(p for p in (gesture, context, direction) if p)
