"""The gate's link rule weighs shared words: a person, a number or a common verb in
common is no relation (issue 28 §1: unrelated-but-similar facts linked ≤ 2 %)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tideline.embed.profiles import PROFILES
from tideline.write.contrast import linkable, weight
from tideline.write.path import judge

E5 = PROFILES["e5"]
# A cosine inside the e5 profile's link band (related ≤ cos < same): the words decide.
BAND = (E5.related + E5.same) / 2

# Hard negatives the gate bench (seed 7) linked before the weights: one person and a
# common verb (负责) or a measure word (次), one person and one number (Priya, 7).
UNRELATED = [
    ("赵磊这个季度负责orchard的值班", "赵磊负责审核quarry的发布，每个周二一次"),
    ("李娜这个季度负责nimbus的值班", "李娜负责审核atlas的发布，每个周一一次"),
    ("张伟负责审核orchard的发布，每个周一一次", "张伟这个季度负责harbor的值班"),
    ("atlas的夜间任务失败后会重试三次，然后通知刘洋", "刘洋负责审核lantern的发布，每个周一一次"),
    ("beacon的夜间任务失败后会重试十次，然后通知王芳", "王芳负责审核meadow的发布，每个周四一次"),
    ("Priya wants the meadow reports in the team channel by 7 am",
     "The lantern nightly job retries seven times before it pages Priya"),
    ("测试服务器放在法兰克福的机房里。", "集成测试的截止日期是下周五。"),
]
# Facts that continue each other: they share their topic, not only a person.
RELATED = [
    ("atlas的测试服务器放在上海的机房里", "atlas的测试服务器下个月从上海的机房搬走"),
    ("赵磊负责审核atlas的发布", "atlas的发布推迟到下周，赵磊会重新审核"),
    ("Lena reviews the atlas release every Monday", "Lena moved the atlas release to Friday"),
    ("Der Staging-Server von atlas steht in Berlin",
     "Der Staging-Server von atlas zieht im Mai nach Wien um"),
]


@pytest.mark.parametrize(("old", "new"), UNRELATED)
def test_a_shared_person_and_a_common_word_do_not_link(old: str, new: str) -> None:
    assert judge(new, old, BAND, E5.same, E5.related, E5.abstain)[0] == "new"
    assert judge(old, new, BAND, E5.same, E5.related, E5.abstain)[0] == "new"


@pytest.mark.parametrize(("old", "new"), RELATED)
def test_facts_that_continue_each_other_still_link(old: str, new: str) -> None:
    assert judge(new, old, BAND, E5.same, E5.related, E5.abstain)[0] == "link"


def test_weights() -> None:
    assert weight("#7") < 1 and weight("赵磊") < 1 and weight("李娜") < 1  # slots
    assert weight("负责") < 1 and weight("次") < weight("负责")  # common, one character
    assert weight("审核") == 1 and weight("服务器") == 1 and weight("release") == 1
    assert weight("lena", frozenset({"lena"})) < 1


NAMES = ["赵磊", "李娜", "王芳", "刘洋", "欧阳娜娜"]
FACTS = ["{n}这个季度负责{p}的值班", "{n}负责审核{p}的发布，每个周{d}一次",
         "{p}的夜间任务失败后会重试{k}次，然后通知{n}", "{n}希望每天{k}点前在群里看到{p}的报告"]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(NAMES), pair=st.permutations(range(len(FACTS))),
       k=st.sampled_from("二三五七十"), d=st.sampled_from("一二三四五"))
def test_one_person_in_two_facts_never_links_them(name: str, pair: list[int], k: str,
                                                  d: str) -> None:
    a = FACTS[pair[0]].format(n=name, p="atlas", d=d, k=k)
    b = FACTS[pair[1]].format(n=name, p="quarry", d=d, k=k)
    assert not linkable(a, b), (a, b)


# Hard negatives of the gate bench (seed 8) that e5 puts at cosine 0.935–0.94: two
# wordings with the same (absent) slots, which the gate potentiated — one fact lost —
# or linked, when their cosine reached the profile's ``same``.
ABOVE_SAME = [
    ("刘洋负责审核atlas的发布，每个周一一次", "刘洋这个季度负责beacon的值班"),
    ("赵磊负责审核meadow的发布，每个周二一次", "beacon每个周二部署"),
    ("杨帆负责审核meadow的发布，每个周二一次", "beacon的夜间任务失败后会重试七次，然后通知杨帆"),
]


@pytest.mark.parametrize(("old", "new"), ABOVE_SAME)
def test_close_vectors_without_shared_content_are_new(old: str, new: str) -> None:
    cosine = (E5.same + 1) / 2
    assert judge(new, old, cosine, E5.same, E5.related, E5.abstain)[0] == "new"


def test_a_paraphrase_still_potentiates() -> None:
    assert judge("Remember: the atlas cache TTL is five minutes",
                 "The atlas cache TTL is 5 minutes", 0.95, E5.same, E5.related,
                 E5.abstain)[0] == "potentiate"
    assert judge("提醒：atlas的缓存过期时间是五分钟", "atlas的缓存过期时间是5分钟", 0.95,
                 E5.same, E5.related, E5.abstain)[0] == "potentiate"


def test_a_short_chinese_paraphrase_still_potentiates() -> None:
    # A `real` bench paraphrase pair (cosine 0.989): few words shared, most of what it says.
    old, new = "她很能吃辣，但是完全不吃香菜。", "她特别能吃辣，不过香菜一点都不碰。"
    assert judge(new, old, 0.989, E5.same, E5.related, E5.abstain)[0] == "potentiate"
