"""The presentation features of style control, counted on texts whose counts are known."""

import pytest

from h2htalk.stats.style_features import FEATURES, emoji_count, features


def counted(text) -> dict:
    return dict(zip(FEATURES, features(text), strict=True))


def test_a_chinese_companion_reply_is_counted_feature_by_feature():
    text = (
        "  （轻轻抱住你）别难过呀😊\n"
        "## 今天的安排\n"
        "1、早上去散步\n"
        "2. 中午吃点好的\n"
        "- 晚上早点睡(打个哈欠)\n"
        "你觉得怎么样？还想聊聊吗?\n  "
    )
    assert counted(text) == {
        "length": len(text.strip()),
        "list_items": 3,
        "headers": 1,
        "actions": 2,
        "emoji": 1,
        "questions": 2,
    }


@pytest.mark.parametrize(
    ("text", "feature", "expected"),
    [
        ("# 一\n### 二\n####### 七个井号不是标题\n#没有空格\n    # 缩进四格是代码", "headers", 2),
        ("- a\n* b\n+ c\n• d\n-e\n*强调*\n12) f\n3.g\n1、h", "list_items", 6),
        ("（）( ) (a（b）c) （mixed)", "actions", 2),  # empty pairs do not count
        ("（第一行\n第二行）", "actions", 0),  # an action does not span lines
        ("What? 真的？？", "questions", 3),
        ("", "length", 0),
        (None, "length", 0),
        ("  你好  ", "length", 2),
    ],
)
def test_each_feature_counts_what_it_says(text, feature, expected):
    assert counted(text)[feature] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("😊😊", 2),
        ("❤️", 1),  # heart + variation selector
        ("👍🏽", 1),  # skin tone modifier
        ("👨‍👩‍👧", 1),  # a ZWJ family
        ("🇨🇳🇯🇵", 2),  # two flags, four regional indicators
        ("⭐✨☀", 3),
        ("你好，世界！", 0),
        ("〽〰", 2),
    ],
)
def test_emoji_are_counted_as_drawn(text, expected):
    assert emoji_count(text) == expected
