from scenarios.companions.models import CompanionModel, GenerationRun, Response

from .bank import Persona, ReviewComment, Revision, Scenario, Tag

__all__ = [
    "CompanionModel",
    "GenerationRun",
    "Persona",
    "Response",
    "ReviewComment",
    "Revision",
    "Scenario",
    "Tag",
]
