"""The errors of releases: each says in one sentence why a release cannot be frozen or computed
(the page, the API and the management command show it as it is)."""


class ReleaseError(ValueError):
    """A release cannot be frozen or computed (said in one sentence)."""


class InputsChanged(ReleaseError):
    """Inputs of a release were changed or deleted since it was frozen."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(
            "the release's inputs changed since it was frozen, so its numbers cannot be "
            "reproduced: " + "; ".join(problems)
        )
