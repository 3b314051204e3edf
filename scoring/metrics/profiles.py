"""The two profiles of the reference metrics and the composite, by name (no heavy imports:
forms, pages and the API read these).

- "platform" (the default): word tokens (punctuation, symbols and whitespace dropped, Latin
  lower-cased, English by \\w+ words), BLEU-3 with exact thirds, an empty answer scored 0, and a
  composite renormalised over the terms present (scoring.metrics.reference, composite).
- "paper": the released H2HTalk evaluator (evaluate/ of LolerPanda/H2HTalk at commit 4730dae9)
  reproduced exactly: every token of jieba.cut on the stripped text, BLEU-3 weights
  (0.33, 0.33, 0.34), empty or whitespace-only answers left out of every mean, a missing model
  term counted 0.0 (no renormalisation) (scoring.metrics.paper_profile).
"""

from django.utils.translation import gettext_lazy as _

PLATFORM, PAPER = "platform", "paper"
DEFAULT = PLATFORM
PROFILES = (PLATFORM, PAPER)
LABELS = {
    PLATFORM: _("platform profile (word tokens, composite renormalised over the terms present)"),
    PAPER: _(
        "paper profile (the released H2HTalk evaluator, reproduced exactly: jieba tokens with "
        "punctuation and spaces, empty answers left out, missing model terms count 0)"
    ),
}
CHOICES = [(name, LABELS[name]) for name in PROFILES]
# MetricScore.values of a profile other than the default carries {"profile": name}, so the
# release digest of stored metrics covers it; rows of the default carry no such key (those
# stored before profiles existed were computed with it).
VALUES_KEY = "profile"


def check(profile: str | None) -> str:
    """The profile's name (None → the default); ValueError for an unknown one."""
    if profile is None or profile == "":
        return DEFAULT
    if profile not in PROFILES:
        raise ValueError(f"unknown metrics profile {profile!r}: use one of {', '.join(PROFILES)}")
    return profile


def of_values(values) -> str:
    """The profile a stored MetricScore.values was computed with."""
    return (values or {}).get(VALUES_KEY) or DEFAULT
