"""Build the chat-completions messages a companion receives for one scenario.

System prompt = persona (+ SAP block unless switched off) + the subtask's instructions +
the context the subtask needs (memory, today's schedule); then the conversation history and
the user's final message. Proactive subtasks get a short cue in place of a user message,
because most chat endpoints require the last message to come from the user.
"""

from scenarios.models import Scenario
from scenarios.taxonomy import DEFAULT_SAP_BLOCK

SUBTASK_INSTRUCTIONS = {
    "dialogue_base": "Reply to the user as their companion: natural, warm and in character. "
    "Keep it short, like a chat message; stage directions in parentheses are allowed.",
    "dialogue_emotion": "The user needs emotional support. Notice the feeling behind the words, "
    "including needs they only hint at; validate it, help them regulate it and offer one small "
    "next step. Do not lecture, mirror distress or promise what you cannot keep.",
    "dialogue_schedule": "Reply in character and weave in the user's plans for today where it "
    "helps (a reminder, encouragement, an offer), without reciting the whole schedule.",
    "recollection_synthesize": "Extract the one piece of information from the conversation worth "
    "remembering about the user. Answer in exactly three lines:\n"
    "Memory content: <what to remember>\nMemory category: <one category>\n"
    "Memory importance: <0 = about a week, 1 = about three months, 2 = long-term>\n"
    "If there is nothing worth remembering, answer only: No key information extracted.",
    "recollection_refine": "Rewrite the memory below as one first-person sentence from the "
    "companion's point of view, at most 50 characters, keeping every fact.",
    "recollection_initialize": "Start the conversation yourself: send a short, caring message "
    "that naturally brings up something you remember about the user.",
    "itinerary_basic": "Give the user a short, friendly overview of their day from the schedule.",
    "itinerary_middle": "Turn the user's plans into at most 5 lines, each exactly "
    '"HH:MM activity", in time order, and nothing else.',
    "itinerary_advanced": "Make a detailed sub-schedule for the plan the user asks about: timed "
    "steps with practical details (travel, preparation, breaks).",
    "itinerary_feedback": "The user commented on the plan. Answer their comment, adjust the plan "
    "if needed and say what changed; neither give in to everything nor argue.",
    "itinerary_initialize": "Start the conversation yourself: greet the user and mention what "
    "today's plans hold, with one helpful suggestion.",
}
PROACTIVE_CUE = "(The user has not written anything yet. Send your opening message now.)"
LANGUAGE_RULES = {"zh": "Answer in Chinese.", "en": "Answer in English."}


def _memory_block(memory: list) -> str:
    lines = []
    for entry in memory:
        extras = [entry.get("category", "")]
        if entry.get("importance") is not None:
            extras.append(f"importance {entry['importance']}")
        suffix = ", ".join(x for x in extras if x)
        lines.append(f"- {entry['content']}" + (f" ({suffix})" if suffix else ""))
    return "What you remember about the user:\n" + "\n".join(lines)


def _schedule_block(schedule: list) -> str:
    lines = [f"- {item['time']} {item['activity']}".replace("-  ", "- ") for item in schedule]
    return "The user's schedule for today:\n" + "\n".join(lines)


def build_messages(scenario: Scenario, sap: bool = True) -> list[dict]:
    persona = scenario.persona
    if persona is not None:
        parts = [persona.system_prompt(sap=sap)]
    else:
        parts = ["You are the user's companion.", DEFAULT_SAP_BLOCK if sap else ""]
    parts.append(SUBTASK_INSTRUCTIONS[scenario.subtask])
    parts.append(LANGUAGE_RULES.get(scenario.language, ""))
    if scenario.memory:
        parts.append(_memory_block(scenario.memory))
    if scenario.schedule:
        parts.append(_schedule_block(scenario.schedule))
    messages = [{"role": "system", "content": "\n\n".join(p for p in parts if p)}]
    for turn in scenario.history:
        role = turn["role"] if turn["role"] in ("user", "assistant") else "system"
        messages.append({"role": role, "content": turn["content"]})
    if scenario.user_message.strip():
        messages.append({"role": "user", "content": scenario.user_message})
    elif messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": PROACTIVE_CUE})
    return messages
