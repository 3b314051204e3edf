"""Scenario bank: JSONL import (generated and released data) and the filtered list page.

1. 4,650 generated scenarios in the platform JSONL schema (all 11 subtasks, mixed zh/en,
   persona objects inline, tags), imported as `manage.py import_scenarios` does: preview (dry
   run) on the empty database, the import itself (scenarios, personas, tags, a revision each),
   then the same file again (nothing changes). Before it, a fifth of that size is imported and
   deleted: the resident peak of the two sizes side by side (the import streams: it should
   not grow with the file). Each row gives the CPU time of this process and of the PostgreSQL
   server process, the rows per CPU-second of both together (what an idle core would do; the
   wall time on the shared machine depends on its load), and the load average.
2. The released files in ../shared/data/h2htalk/ (9 of the 11 subtasks, 4,002 lines), one
   import each, timed together.
3. `/scenarios/` as a logged-in researcher over the ~8,650 scenarios, one row per query:
   median and p95 latency over BENCH_REPEAT requests (default 30) after a warm-up, and the
   SQL query count of one request.

BENCH_SCENARIOS (default 4650) and BENCH_REPEAT change the sizes for a quick run.
"""

import json
import random
import tempfile
from pathlib import Path
from urllib.parse import urlencode

from bench._common import (
    SHARED_DATA,
    Step,
    backend_pid,
    env_int,
    latency_row,
    log,
    timed,
)

SEED = 20250612
SUBTASKS = [
    "dialogue_base",
    "dialogue_emotion",
    "dialogue_schedule",
    "recollection_synthesize",
    "recollection_refine",
    "recollection_initialize",
    "itinerary_basic",
    "itinerary_middle",
    "itinerary_advanced",
    "itinerary_feedback",
    "itinerary_initialize",
]
# Roughly the release's proportions: dialogue_base dominates.
SUBTASK_WEIGHTS = [30, 8, 6, 9, 10, 4, 8, 6, 6, 6, 7]
PROACTIVE = {"recollection_initialize", "itinerary_initialize"}  # no final user message

# ---------------------------------------------------------------- vocabulary

PERSONAS = [
    {
        "name": "林知夏",
        "summary": "温柔细心的建筑师，说话慢条斯理，喜欢在图纸边上画小猫。",
        "character": "二十八岁，在南京一家建筑事务所工作。习惯用动作和细节表达关心，"
        "不擅长说甜言蜜语，但会记得你随口提过的每一件小事。周末喜欢去老城区写生。",
        "language": "zh",
        "sap_enabled": True,
    },
    {
        "name": "顾言",
        "summary": "大学图书馆的管理员，安静、可靠，偶尔冷幽默。",
        "character": "三十岁，在图书馆古籍部工作，熟悉每一排书架。"
        "说话简短克制，遇到你情绪低落时会先倒一杯热水，再慢慢听你说。",
        "language": "zh",
        "sap_enabled": True,
    },
    {
        "name": "苏沐",
        "summary": "自由插画师，活泼爱笑，养了一只叫布丁的柯基。",
        "character": "二十五岁，住在杭州，工作时间不固定。热爱甜品和雨天，"
        "常常把日常画成小漫画分享给你，也会认真提醒你按时吃饭睡觉。",
        "language": "zh",
        "sap_enabled": False,
    },
    {
        "name": "陈屿",
        "summary": "消防员，外表严肃，内心柔软，值班间隙会给你发消息。",
        "character": "三十二岁，在成都的消防站工作，作息按班次轮换。"
        "重视安全，遇到危险话题绝不敷衍，会认真询问你的状况并陪你想办法。",
        "language": "zh",
        "sap_enabled": True,
    },
    {
        "name": "Theo Marlowe",
        "summary": "A dry-humoured bookbinder who runs a tiny workshop above a bakery.",
        "character": "Thirty-four, lives in Edinburgh. Talks while he works, notices small "
        "details and teases gently. Shows care through practical help rather than speeches.",
        "language": "en",
        "sap_enabled": True,
    },
    {
        "name": "June Okafor",
        "summary": "A climbing instructor who is relentlessly encouraging and a terrible cook.",
        "character": "Twenty-nine, based in Manchester. Early riser, plans everything in a "
        "battered notebook, believes most problems get smaller after a walk and a snack.",
        "language": "en",
        "sap_enabled": False,
    },
]

ZH_NAMES = ["小雨", "阿杰", "安妮", "梅根", "乔伊", "妈妈", "室友", "导师", "老板", "表姐"]
ZH_PLACES = ["咖啡馆", "图书馆", "公园", "海边", "老城区", "健身房", "地铁站", "花市", "书店"]
ZH_FOODS = ["咖啡", "奶茶", "抹茶冰淇淋", "火锅", "小笼包", "蓝莓芝士蛋糕", "热可可", "桂花糕"]
ZH_ACTIVITIES = [
    "晨跑",
    "写论文",
    "开组会",
    "整理房间",
    "去超市买菜",
    "练吉他",
    "看展览",
    "复习考试",
    "遛狗",
    "和朋友吃饭",
    "加班赶方案",
    "学做饭",
]
ZH_ACTIONS = [
    "（轻轻放下手中的咖啡杯）",
    "（耳尖微红别过脸）",
    "（把外套披在你肩上）",
    "（揉了揉你的头发）",
    "（认真地看着你）",
    "（递过一杯热水）",
    "(微微颔首)",
    "（笑着叹了口气）",
]
ZH_USER = [
    "今天在{place}待了一下午，{food}倒是挺好喝的，就是心里一直空落落的。",
    "{name}又说我做事太慢了，我明明已经很努力了，真的有点委屈。",
    "最近总是失眠，躺在床上脑子里全是明天要{activity}的事情。",
    "下班路上突然下起了雨，没带伞，只好躲在{place}门口等雨停。",
    "我今天终于把{activity}这件事做完了！虽然累，但是很有成就感。",
    "你说我要不要跟{name}道个歉？那天吵架我也有不对的地方。",
    "刚刚路过{place}，想起上次我们一起去的时候你说的话，忍不住笑了。",
    "周末本来打算{activity}，结果睡到中午才起床，感觉一天又浪费了。",
    "{name}下个月要搬去别的城市了，我有点舍不得，又不知道该怎么说。",
    "今天的{food}买一送一，我想着给你留了一份，可惜你吃不到。",
    "面试结果还没出来，我已经刷了二十遍邮箱了，好焦虑。",
    "我有时候觉得自己什么都做不好，{activity}也坚持不下去。",
]
ZH_REPLY = [
    "累了就先停一停，不是每一天都要过得很有效率，能好好照顾自己已经很了不起了。",
    "你愿意把这些说出来，我很高兴。我们一起想想，明天能先做哪一件小事？",
    "{name}的话听听就好，你的节奏不需要和别人一样。我看到的是一个很认真的你。",
    "要不要先去{place}走一走？换个环境，心情也许会轻一点，我陪你。",
    "下次{activity}的时候叫上我吧，我负责带{food}，你负责把进度分享给我听。",
    "失眠的时候别逼自己马上睡着，试着把明天的事写在纸上，写完就交给明天的你。",
    "道歉不代表认输，只是说明你在乎这段关系。想好了就去说，我在这儿等你的消息。",
    "舍不得就直接告诉{name}吧，好好告别，也是给彼此一个温柔的交代。",
    "焦虑的时候深呼吸三次，然后把手机放远一点，我们聊点别的，好吗？",
    "做不好的时候也没关系，你已经比上个月的自己进步很多了，我都记得。",
]
ZH_MEMORY = [
    ("喜欢喝不加糖的{food}", "饮食"),
    ("每周三晚上要{activity}", "日常"),
    ("和{name}是大学同学，关系很好", "社交"),
    ("最近在准备考研，压力很大", "学习"),
    ("害怕打雷，下雨天容易心情低落", "情绪"),
    ("养了一只叫团子的橘猫", "宠物"),
    ("梦想是去冰岛看极光", "旅行"),
    ("对花生过敏", "健康"),
    ("周末常去{place}看书", "爱好"),
    ("工作是产品经理，经常加班", "工作"),
]
ZH_SCHEDULE = [
    "在{place}见{name}",
    "{activity}",
    "午饭吃{food}",
    "线上会议",
    "去医院复查",
    "健身一小时",
    "给家里打电话",
    "取快递",
]

EN_NAMES = ["Maya", "Sam", "my sister", "Priya", "my manager", "Leo", "my flatmate", "Grandma"]
EN_PLACES = ["the library", "the park", "the station", "the bakery", "the gym", "the market"]
EN_FOODS = ["coffee", "cardamom buns", "ramen", "hot chocolate", "toast", "lemon cake"]
EN_ACTIVITIES = [
    "revising for the exam",
    "a long run",
    "the quarterly report",
    "cleaning the flat",
    "guitar practice",
    "a job interview",
    "grocery shopping",
    "walking the dog",
]
EN_ACTIONS = [
    "(looks up from the workbench)",
    "(slides a mug across the table)",
    "(laughs quietly)",
    "(taps the notebook with a pen)",
    "(sits down next to you)",
]
EN_USER = [
    "I spent the whole afternoon at {place} with a {food} and got absolutely nothing done.",
    "{name} said my presentation was fine, but the way they said it keeps replaying in my head.",
    "I can't sleep again. My brain keeps rehearsing {activity} like it's a disaster movie.",
    "Guess who finally finished {activity}? Me. I want a medal, or at least a biscuit.",
    "Do you think I should apologise to {name}? I was pretty sharp with them yesterday.",
    "It rained the whole way home and I forgot my umbrella, so I'm basically a sponge now.",
    "Honestly some days I feel like I'm failing at everything, even {activity}.",
    "I walked past {place} today and remembered what you said last time. Made me smile.",
    "{name} is moving away next month and I don't know how to say goodbye properly.",
]
EN_REPLY = [
    "You don't have to earn rest. Put the kettle on and let today be finished.",
    "That replay loop is your brain trying to protect you, not proof you did badly.",
    "Write tomorrow's worries on a scrap of paper, then leave them there until morning.",
    "An apology isn't losing. It just tells {name} the friendship matters more than the point.",
    "Come by {place} tomorrow; I'll bring {food} and you can tell me the whole story.",
    "You got through {activity}. That counts, even if it was messy.",
    "Goodbyes don't need to be perfect. Tell {name} one true thing they meant to you.",
    "Let's make the next step tiny: one email, one glass of water, one early night.",
]
EN_MEMORY = [
    ("Drinks {food} without sugar", "Food"),
    ("Has {activity} every Thursday", "Routine"),
    ("Close friends with {name} since school", "Social"),
    ("Afraid of thunderstorms", "Emotion"),
    ("Has a ginger cat called Biscuit", "Pets"),
    ("Wants to see the northern lights", "Travel"),
    ("Allergic to peanuts", "Health"),
    ("Works as a junior nurse on night shifts", "Work"),
]
EN_SCHEDULE = [
    "meet {name} at {place}",
    "{activity}",
    "lunch: {food}",
    "team stand-up",
    "dentist appointment",
    "call Mum",
    "pick up a parcel",
]

TAGS = [
    "everyday",
    "food",
    "work-stress",
    "loneliness",
    "family",
    "travel",
    "study",
    "health",
    "sleep",
    "pets",
    "friendship",
    "romance",
    "weather",
    "hobby",
    "music",
    "exercise",
    "holiday",
    "conflict",
    "reassurance",
    "playful",
    "memory",
    "planning",
    "safety",
    "grief",
    "celebration",
    "moving",
    "exam",
    "city-life",
    "rainy-day",
    "late-night",
]
TAG_WEIGHTS = [1 / (rank + 1) ** 0.8 for rank in range(len(TAGS))]  # a few common, a long tail
STATES = ["draft", "in_review", "approved", "retired"]
STATE_WEIGHTS = [40, 20, 35, 5]


class Writer:
    """Fills templated sentences in one language from a seeded generator."""

    def __init__(self, rng: random.Random, language: str):
        self.rng = rng
        self.zh = language == "zh"
        if self.zh:
            self.names, self.places, self.foods = ZH_NAMES, ZH_PLACES, ZH_FOODS
            self.activities, self.actions = ZH_ACTIVITIES, ZH_ACTIONS
            self.user_lines, self.reply_lines = ZH_USER, ZH_REPLY
            self.memories, self.plans = ZH_MEMORY, ZH_SCHEDULE
        else:
            self.names, self.places, self.foods = EN_NAMES, EN_PLACES, EN_FOODS
            self.activities, self.actions = EN_ACTIVITIES, EN_ACTIONS
            self.user_lines, self.reply_lines = EN_USER, EN_REPLY
            self.memories, self.plans = EN_MEMORY, EN_SCHEDULE

    def fill(self, template: str) -> str:
        r = self.rng
        return template.format(
            name=r.choice(self.names),
            place=r.choice(self.places),
            food=r.choice(self.foods),
            activity=r.choice(self.activities),
        )

    def join(self, sentences: list[str]) -> str:
        return ("" if self.zh else " ").join(sentences)

    def user(self, low: int = 1, high: int = 3) -> str:
        picks = self.rng.sample(self.user_lines, self.rng.randint(low, high))
        return self.join([self.fill(t) for t in picks])

    def reply(self, low: int = 2, high: int = 4) -> str:
        picks = self.rng.sample(self.reply_lines, self.rng.randint(low, high))
        return self.rng.choice(self.actions) + self.join([self.fill(t) for t in picks])

    def history(self, low: int = 2, high: int = 6) -> list[dict]:
        turns = []
        for i in range(self.rng.randint(low, high)):
            if i % 2 == 0:
                turns.append({"role": "user", "content": self.user(1, 2)})
            else:
                turns.append({"role": "assistant", "content": self.reply(1, 2)})
        return turns

    def memory(self, low: int = 1, high: int = 5) -> list[dict]:
        picks = self.rng.sample(self.memories, self.rng.randint(low, high))
        return [
            {"content": self.fill(text), "category": category, "importance": self.rng.randint(0, 2)}
            for text, category in picks
        ]

    def schedule(self, low: int = 2, high: int = 6) -> list[dict]:
        count = self.rng.randint(low, high)
        minutes = sorted(self.rng.sample(range(7 * 60, 22 * 60, 15), count))
        return [
            {
                "time": f"{m // 60:02d}:{m % 60:02d}",
                "activity": self.fill(self.rng.choice(self.plans)),
            }
            for m in minutes
        ]

    def timed_plan(self, items: list[dict]) -> str:
        return "\n".join(f"{item['time']} {item['activity']}" for item in items)


def scenario(rng: random.Random, number: int) -> dict:
    subtask = rng.choices(SUBTASKS, SUBTASK_WEIGHTS)[0]
    language = "zh" if rng.random() < 0.7 else "en"
    w = Writer(rng, language)
    personas = [p for p in PERSONAS if p["language"] == language]
    history, memory, schedule = w.history(), [], []
    user_message, reference = w.user(), w.reply()
    if subtask == "dialogue_schedule":
        schedule = w.schedule()
    elif subtask == "dialogue_emotion":
        memory = w.memory(0, 2)
    elif subtask.startswith("recollection"):
        memory = w.memory(2, 6)
        if subtask == "recollection_synthesize":
            extracted = w.memory(1, 2)
            reference = "\n\n".join(
                f"记忆内容：{m['content']}\n记忆类别：{m['category']}\n记忆重要性：{m['importance']}"
                if w.zh
                else f"Memory: {m['content']}\nCategory: {m['category']}\nImportance: {m['importance']}"
                for m in extracted
            )
        elif subtask == "recollection_refine":
            reference = w.fill(rng.choice(w.memories)[0])
    else:  # itinerary
        schedule = w.schedule(3, 6)
        if subtask == "itinerary_middle":
            reference = w.timed_plan(w.schedule(3, 5))
        elif subtask == "itinerary_advanced":
            reference = w.timed_plan(w.schedule(5, 8)) + "\n" + w.reply(1, 2)
        elif subtask == "itinerary_basic":
            reference = w.reply(3, 5)
    if subtask in PROACTIVE:
        user_message = ""
    risky = (subtask == "dialogue_emotion" and rng.random() < 0.3) or rng.random() < 0.05
    row = {
        "external_id": f"gen-{number:05d}",
        "subtask": subtask,
        "persona": rng.choice(personas),
        "language": language,
        "history": history,
        "memory": memory,
        "schedule": schedule,
        "user_message": user_message,
        "reference_response": reference,
        "implicit_need": rng.random() < 0.2,
        "evolving_need": rng.random() < 0.1,
        "risk_level": rng.choice(["low", "medium", "high"]) if risky else "none",
        "tags": sorted(set(rng.choices(TAGS, TAG_WEIGHTS, k=rng.randint(1, 4)))),
        "state": rng.choices(STATES, STATE_WEIGHTS)[0],
        "source": f"bench-generator/seed-{SEED}",
    }
    if rng.random() < 0.05:  # some rows carry no id: deduplicated by content hash instead
        del row["external_id"]
    return row


def generate(path: Path, count: int, seed: int = SEED) -> dict:
    rng = random.Random(seed)
    chars = 0
    with path.open("w", encoding="utf-8") as out:
        for number in range(1, count + 1):
            row = scenario(rng, number)
            chars += sum(
                len(t)
                for t in (
                    row["user_message"],
                    row["reference_response"],
                    *(turn["content"] for turn in row["history"]),
                )
            )
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return {"bytes": path.stat().st_size, "mean_text_chars": round(chars / count)}


# ---------------------------------------------------------------- benchmarks


def import_notes(report) -> str:
    parts = [f"{report.created} new", f"{report.updated} updated", f"{report.unchanged} unchanged"]
    if report.duplicates:
        parts.append(f"{report.duplicates} dup")
    if report.personas_created:
        parts.append(f"{report.personas_created} personas")
    return ", ".join(parts)


def bench_imports(author, workdir: Path) -> list[dict]:
    from scenarios.importers import import_file
    from scenarios.models import Persona, Revision, Scenario, Tag

    count = env_int("BENCH_SCENARIOS", 4650)
    server = backend_pid()
    rows = []

    def run(label: str, file: Path, dry_run: bool = False, expect: dict | None = None):
        with Step(label, 0, server) as step:
            report = import_file(str(file), str(file), author=author, dry_run=dry_run)
        assert report.ok, report.errors[:3]
        for key, value in (expect or {}).items():
            assert getattr(report, key) == value, (label, key, getattr(report, key), value)
        step.rows = report.rows
        rows.append(step.row(import_notes(report)))

    small = workdir / "generated_small.jsonl"
    generate(small, count // 5, seed=SEED + 1)
    run(f"import {count // 5:,} generated: write", small, expect={"updated": 0})
    Scenario.objects.all().delete()
    Persona.objects.all().delete()
    Tag.objects.all().delete()
    path = workdir / "generated_scenarios.jsonl"
    seconds, info = timed(generate, path, count)
    log(
        f"generated {count:,} scenarios in {seconds:.1f} s "
        f"({info['bytes'] / 1e6:.1f} MB, {info['mean_text_chars']} text chars per scenario)"
    )
    label = f"import {count:,} generated"
    run(f"{label}: preview", path, dry_run=True)
    assert not Scenario.objects.exists()
    run(f"{label}: write", path, expect={"updated": 0, "unchanged": 0})
    assert Revision.objects.count() == Scenario.objects.count() and Persona.objects.exists()
    run(f"{label}: again", path, expect={"created": 0, "updated": 0})

    releases = sorted(SHARED_DATA.glob("*.jsonl"))
    if releases:
        total = sum(1 for file in releases for _ in file.open("rb"))
        with Step(f"import the release ({len(releases)} files)", total, server) as step:
            for file in releases:
                report = import_file(str(file), file.name, author=author)
                assert report.ok and report.created == report.rows, report.errors[:3]
        rows.append(step.row(f"{total:,} scenarios, one transaction per file"))
    else:
        log(f"skipped the release import: no files in {SHARED_DATA}")
    return rows


def list_queries() -> list[tuple[str, dict, dict]]:
    """(label, query parameters, extra headers) for the list page."""
    htmx = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "results"}
    return [
        ("no filter", {}, {}),
        ("subtask=dialogue_emotion", {"subtask": "dialogue_emotion"}, {}),
        ("state=approved&language=en", {"state": "approved", "language": "en"}, {}),
        ("tags=sleep", {"tags": "sleep"}, {}),
        ("tags=everyday (most common tag)", {"tags": "everyday"}, {}),
        ("tags=sleep&tags=pets", {"tags": ["sleep", "pets"]}, {}),
        ("q=咖啡", {"q": "咖啡"}, {}),
        ("q=coffee", {"q": "coffee"}, {}),
        ("q=失眠 明天 (2 terms)", {"q": "失眠 明天"}, {}),
        ("page=50", {"page": "50"}, {}),
        (
            "combined (dim+state+flags+tag+q)",
            {
                "dimension": "dialogue",
                "state": ["draft", "in_review"],
                "flags": "implicit_need",
                "tags": "everyday",
                "q": "你",
            },
            {},
        ),
        ("htmx partial: state=approved", {"state": "approved"}, htmx),
    ]


def bench_list_page(user) -> list[dict]:
    from django.db import connection
    from django.http import QueryDict
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from scenarios.filters import ScenarioFilter
    from scenarios.models import Scenario

    repeat = env_int("BENCH_REPEAT", 30)
    client = Client()
    client.force_login(user)
    rows = []
    for label, params, headers in list_queries():
        url = "/scenarios/"
        query = urlencode(params, doseq=True)
        if query:
            url += "?" + query
        for _ in range(3):  # warm-up: templates, query plans, caches
            response = client.get(url, **headers)
            assert response.status_code == 200, (url, response.status_code)
        samples = []
        for _ in range(repeat):
            seconds, response = timed(client.get, url, **headers)
            assert response.status_code == 200
            samples.append(seconds)
        with CaptureQueriesContext(connection) as captured:
            client.get(url, **headers)
        matches = ScenarioFilter(QueryDict(query), queryset=Scenario.objects.all()).qs.count()
        rows.append(
            latency_row(
                f"list: {label}",
                samples,
                len(captured.captured_queries),
                matches,
                f"{len(response.content) // 1024} KiB",
            )
        )
        log(f"list: {label}: median {rows[-1]['median_ms']} ms, {matches} matches")
    return rows


def run() -> list[dict]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection

    from h2htalk.roles import RESEARCHER, ensure_role_groups

    ensure_role_groups()
    user = get_user_model().objects.create_user("bench-researcher", password="bench-only-pw-1")
    user.groups.add(Group.objects.get(name=RESEARCHER))

    with tempfile.TemporaryDirectory(prefix="h2htalk-bench-data-") as workdir:
        rows = bench_imports(user, Path(workdir))
    if connection.vendor == "postgresql":
        # What autovacuum would do shortly after a bulk load; without it the planner guesses.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    rows += bench_list_page(user)
    return rows
