from .bank import Persona, ReviewComment, Revision, Scenario, Tag
from .companions import CompanionModel, GenerationRun, Response

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
