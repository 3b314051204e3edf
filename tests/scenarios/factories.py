"""Small builders for scenario tests (no factory library needed for this few)."""

from itertools import count

from scenarios import services
from scenarios.models import Persona, Scenario

_ids = count(1)


def persona(name="Lin", **fields):
    return Persona.objects.get_or_create(
        name=name, defaults={"summary": "A calm friend", **fields}
    )[0]


def scenario(author=None, tags=(), **fields):
    number = next(_ids)
    values = {
        "external_id": f"t{number:04d}",
        "subtask": "dialogue_emotion",
        "user_message": f"I had a rough day at work ({number})",
        "reference_response": "That sounds exhausting. Want to tell me what happened?",
        "language": "en",
    }
    values.update(fields)
    return services.create_scenario(Scenario(**values), author, list(tags))
