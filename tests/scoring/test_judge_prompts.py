"""The judge's messages: rubric as system message, the scenario's whole context, the reference
answer as a hint, responses in the order given, and the answer format (no database)."""

from scenarios.companions.prompts import SUBTASK_INSTRUCTIONS
from scenarios.models import Persona, Scenario
from scoring.judges import prompts


def scenario(**fields):
    values = {
        "subtask": "dialogue_schedule",
        "persona": Persona(name="Mira", summary="A calm friend", character="A night-shift nurse."),
        "language": "en",
        "memory": [
            {"content": "has a cat named Bao", "category": "pets", "importance": 2},
            "likes tea",
        ],
        "schedule": [{"time": "09:00", "activity": "dentist"}],
        "history": [
            {"role": "user", "content": "morning"},
            {"role": "assistant", "content": "hey you"},
        ],
        "user_message": "what's up today?",
        "reference_response": "Morning! Dentist at 9, want a reminder?",
        "risk_level": "high",
        "implicit_need": True,
    }
    values.update(fields)
    return Scenario(**values)


def test_single_messages_carry_the_whole_situation():
    messages = prompts.single_messages("RUBRIC", scenario(), "Hi! Dentist at nine.")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == "RUBRIC"
    user = messages[1]["content"]
    for expected in (
        SUBTASK_INSTRUCTIONS["dialogue_schedule"],
        "Persona the companion plays: Mira",
        "A night-shift nurse.",
        "- has a cat named Bao (pets, importance 2)",
        "- likes tea",
        "- 09:00 dentist",
        "User: morning\nCompanion: hey you",
        "The user's final message:\nwhat's up today?",
        "not the only right answer):\nMorning! Dentist at 9, want a reminder?",
        "safety risk level: high",
        "only hinted at",
        "===== Reply =====\nHi! Dentist at nine.\n===== end of Reply =====",
        prompts.SINGLE_FORMAT,
    ):
        assert expected in user, expected
    assert user.endswith(prompts.SINGLE_FORMAT)


def test_pairwise_messages_show_the_responses_in_the_given_order():
    first = prompts.pairwise_messages("R", scenario(), "TEXT-ONE", "TEXT-TWO")[1]["content"]
    second = prompts.pairwise_messages("R", scenario(), "TEXT-TWO", "TEXT-ONE")[1]["content"]
    assert first.index("===== Response 1 =====\nTEXT-ONE") < first.index(
        "===== Response 2 =====\nTEXT-TWO"
    )
    assert (
        "===== Response 1 =====\nTEXT-TWO" in second
        and "===== Response 2 =====\nTEXT-ONE" in second
    )
    assert first.endswith(prompts.PAIRWISE_FORMAT)


def test_proactive_subtasks_and_the_default_rubrics():
    user = prompts.single_messages(
        "R", scenario(user_message="", subtask="itinerary_initialize"), "x"
    )
    assert "the companion writes first" in user[1]["content"]
    for mode in ("single", "pairwise"):
        rubric = prompts.default_rubric(mode)
        for words in (
            "Secure base (Bowlby)",
            "Gottman",
            "Gross",
            "Fisher",
            "crisis line",
            "memory_use",
            "not the only right answer",
        ):
            assert words in rubric, (mode, words)
    assert (
        "Response 1" in prompts.DEFAULT_PAIRWISE_RUBRIC
        and "1 (very" in prompts.DEFAULT_SINGLE_RUBRIC
    )
