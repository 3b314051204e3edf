"""Scenario curation logic shared by pages, API, importers and commands."""

import difflib
import hashlib
import json

from django.db import transaction
from django.db.models import Max
from django.utils.translation import gettext_lazy

from h2htalk.roles import ADMIN, has_role
from scenarios.models import ReviewComment, Revision, Scenario

# Fields that define what a scenario asks of a companion: equal content means a duplicate.
CONTENT_FIELDS = (
    "subtask",
    "persona",
    "history",
    "memory",
    "schedule",
    "user_message",
    "reference_response",
)
# What an author gives a scenario (the edit form, the API, an imported row), tags and state aside.
AUTHORED_FIELDS = (
    "external_id",
    "subtask",
    "persona",
    "language",
    "history",
    "memory",
    "schedule",
    "user_message",
    "reference_response",
    "implicit_need",
    "evolving_need",
    "risk_level",
    "source",
)
# Everything a revision snapshot records (and the diff shows).
SNAPSHOT_FIELDS = (*AUTHORED_FIELDS, "tags", "state")
# A persona as exported with its scenarios and defined inline by an imported row.
PERSONA_FIELDS = ("name", "summary", "character", "language", "sap_enabled", "sap_block")


class TransitionError(ValueError):
    pass


SKIP_REVIEW = "approve_skipping_review"


# action -> (states it may start from, state it leads to, comment kind)
TRANSITIONS = {
    "submit": ((Scenario.State.DRAFT,), Scenario.State.IN_REVIEW, None),
    "approve": ((Scenario.State.IN_REVIEW,), Scenario.State.APPROVED, ReviewComment.Kind.APPROVE),
    "request_changes": (
        (Scenario.State.IN_REVIEW, Scenario.State.APPROVED),
        Scenario.State.DRAFT,
        ReviewComment.Kind.REQUEST_CHANGES,
    ),
    "retire": (
        (Scenario.State.DRAFT, Scenario.State.IN_REVIEW, Scenario.State.APPROVED),
        Scenario.State.RETIRED,
        None,
    ),
    "reopen": ((Scenario.State.RETIRED,), Scenario.State.DRAFT, None),
    # An admin's shortcut for a bank imported as drafts: each revision records the skip.
    SKIP_REVIEW: (
        (Scenario.State.DRAFT, Scenario.State.IN_REVIEW),
        Scenario.State.APPROVED,
        ReviewComment.Kind.APPROVE,
    ),
}
ADMIN_ACTIONS = frozenset({SKIP_REVIEW})
ACTION_LABELS = {
    "submit": gettext_lazy("Submit for review"),
    "approve": gettext_lazy("Approve"),
    "request_changes": gettext_lazy("Request changes"),
    "retire": gettext_lazy("Retire"),
    "reopen": gettext_lazy("Reopen as draft"),
    SKIP_REVIEW: gettext_lazy("Approve, skipping review (admin)"),
}
# What each action does and to which states it applies: the bulk bar's explanation.
ACTION_HELP = {
    "submit": gettext_lazy("drafts go to review; a reviewer then approves them."),
    "approve": gettext_lazy(
        "scenarios in review become approved: only approved scenarios are rated. Drafts must "
        "be submitted for review first."
    ),
    "request_changes": gettext_lazy(
        "scenarios in review or approved go back to draft, with your comment."
    ),
    "retire": gettext_lazy("drafts, scenarios in review and approved ones leave the bank."),
    "reopen": gettext_lazy("retired scenarios become drafts again."),
    SKIP_REVIEW: gettext_lazy(
        "drafts and scenarios in review become approved at once; each revision records that "
        "the review was skipped, and by whom."
    ),
}
SKIP_REVIEW_NOTE = "approved with the review skipped (admin)"


def actions_for(user) -> dict:
    """The actions `user` may apply, with their labels (admins also skip review)."""
    admin = has_role(user, ADMIN)
    return {
        name: label for name, label in ACTION_LABELS.items() if admin or name not in ADMIN_ACTIONS
    }


def allowed_actions(scenario: Scenario, user=None) -> list[str]:
    """The actions that apply to the scenario's state (admin ones only for an admin)."""
    mine = actions_for(user) if user is not None else ACTION_LABELS.keys() - ADMIN_ACTIONS
    return [
        name
        for name, (sources, _, _) in TRANSITIONS.items()
        if scenario.state in sources and name in mine
    ]


def _persona_name(scenario: Scenario) -> str:
    return scenario.persona.name if scenario.persona is not None else ""


def content_of(scenario: Scenario) -> dict:
    return {
        "subtask": scenario.subtask,
        "persona": _persona_name(scenario),
        "history": scenario.history or [],
        "memory": scenario.memory or [],
        "schedule": scenario.schedule or [],
        "user_message": scenario.user_message,
        "reference_response": scenario.reference_response,
    }


def content_hash(scenario: Scenario) -> str:
    return digest(json.dumps(content_of(scenario), ensure_ascii=False, sort_keys=True))


def digest(canonical: str) -> str:
    """The content hash of content_of's dict written as JSON with sorted keys (the importer
    writes that text itself: scenarios.import_rows)."""
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _texts(items) -> list[str]:
    texts = []
    for item in items or []:
        if isinstance(item, dict):
            texts.extend(str(value) for value in item.values())
        else:
            texts.append(str(item))
    return texts


def search_text(scenario: Scenario) -> str:
    """Lower-cased text searched by substring: works for Chinese, which has no word spaces."""
    return search_text_of(
        scenario.external_id,
        _persona_name(scenario),
        scenario.user_message,
        scenario.reference_response,
        scenario.history,
        scenario.memory,
        scenario.schedule,
    )


def search_text_of(external_id, persona, user_message, reference_response, *lists) -> str:
    """search_text from the values themselves (the importer has no model instances)."""
    parts = [external_id, persona, user_message, reference_response]
    for items in lists:
        parts += _texts(items)
    return "\n".join(part for part in parts if part).lower()


def snapshot(scenario: Scenario, tags: list[str] | None = None) -> dict:
    data = content_of(scenario)
    data.update(
        external_id=scenario.external_id,
        implicit_need=scenario.implicit_need,
        evolving_need=scenario.evolving_need,
        risk_level=scenario.risk_level,
        language=scenario.language,
        source=scenario.source,
        state=scenario.state,
        tags=sorted(tags if tags is not None else (t.name for t in scenario.tags.all())),
    )
    return {field: data[field] for field in SNAPSHOT_FIELDS}


def changed_fields(before: dict, after: dict) -> dict:
    return {
        field: [before.get(field), after.get(field)]
        for field in SNAPSHOT_FIELDS
        if before.get(field) != after.get(field)
    }


def record_revision(
    scenario: Scenario, author, action: str, before: dict | None, note: str = ""
) -> Revision | None:
    """Store a revision when something changed (always for the first one)."""
    after = snapshot(scenario)
    changes = changed_fields(before or {}, after) if before is not None else {}
    if before is not None and not changes:
        return None
    last = scenario.revisions.aggregate(last=Max("number"))["last"] or 0
    return Revision.objects.create(
        scenario=scenario,
        number=last + 1,
        author=author,
        action=action,
        note=note[:300],
        snapshot=after,
        changes=changes,
    )


@transaction.atomic
def create_scenario(scenario: Scenario, author, tags: list[str] = ()) -> Scenario:
    from scenarios.models import Tag

    scenario.created_by = author
    scenario.save()
    scenario.tags.set([Tag.objects.get_or_create(name=name)[0] for name in tags])
    record_revision(scenario, author, Revision.Action.CREATED, None)
    return scenario


BACK_TO_REVIEW_NOTE = (
    "content changed while approved: back to review (judgments made on the earlier text are "
    "left out of releases)"
)


def content_changed(before: dict, scenario: Scenario) -> bool:
    """Whether the scenario's content (CONTENT_FIELDS) differs from the snapshot `before`."""
    now = content_of(scenario)
    return any(before.get(name) != now[name] for name in CONTENT_FIELDS)


def back_to_review_if_changed(scenario: Scenario, before: dict) -> bool:
    """An approved scenario whose content changed goes back to review (not yet saved): what
    annotators rate must be text a reviewer approved, and judgments made on the old text no
    longer describe it. State-only and metadata changes (tags, risk level, …) keep it approved.
    Returns whether it was sent back."""
    if (
        before.get("state") == Scenario.State.APPROVED
        and scenario.state == Scenario.State.APPROVED
        and content_changed(before, scenario)
    ):
        scenario.state = Scenario.State.IN_REVIEW
        return True
    return False


def last_content_change(scenario_ids) -> dict:
    """{scenario id: time of its latest revision that changed its content} (scenarios whose
    content never changed after they were created are absent)."""
    rows = (
        Revision.objects.filter(
            scenario_id__in=list(scenario_ids), changes__has_any_keys=list(CONTENT_FIELDS)
        )
        .values("scenario_id")
        .annotate(last=Max("created_at"))
    )
    return {row["scenario_id"]: row["last"] for row in rows}


@transaction.atomic
def update_scenario(scenario: Scenario, author, before: dict, tags: list[str] | None = None):
    """Save an edited scenario; `before` is snapshot() taken before the edit was applied.

    Editing the content of an approved scenario sends it back to review, and its revision
    says so (see back_to_review_if_changed)."""
    from scenarios.models import Tag

    sent_back = back_to_review_if_changed(scenario, before)
    scenario.save()
    if tags is not None:
        scenario.tags.set([Tag.objects.get_or_create(name=name)[0] for name in tags])
    return record_revision(
        scenario,
        author,
        Revision.Action.EDITED,
        before,
        note=BACK_TO_REVIEW_NOTE if sent_back else "",
    )


@transaction.atomic
def transition(scenario: Scenario, author, action: str, comment: str = "") -> Scenario:
    if action not in TRANSITIONS:
        raise TransitionError(f"unknown action {action!r}")
    if action in ADMIN_ACTIONS and not has_role(author, ADMIN):
        raise TransitionError("only an admin may approve with the review skipped")
    sources, target, comment_kind = TRANSITIONS[action]
    scenario = Scenario.objects.select_for_update().get(pk=scenario.pk)
    if scenario.state not in sources:
        raise TransitionError(
            f"cannot {str(ACTION_LABELS[action]).lower()} a scenario that is {scenario.state}"
        )
    if action == "request_changes" and not comment.strip():
        raise TransitionError("say what should change: a comment is required")
    before = snapshot(scenario)
    scenario.state = target
    if action in ("approve", "request_changes", SKIP_REVIEW):
        scenario.reviewer = author
    scenario.save(update_fields=["state", "reviewer", "updated_at"])
    note = f"{action}: {comment}"
    if action == SKIP_REVIEW:
        note = f"{SKIP_REVIEW_NOTE} by {author.get_username()}, from {before['state']}: {comment}"
    record_revision(scenario, author, Revision.Action.STATE, before, note=note)
    if comment_kind or comment.strip():
        ReviewComment.objects.create(
            scenario=scenario,
            author=author,
            kind=comment_kind or ReviewComment.Kind.COMMENT,
            body=comment.strip(),
        )
    return scenario


def bulk_transition(scenario_ids, author, action: str, comment: str = "") -> dict:
    """Apply one action to many scenarios; those it does not apply to are counted, not failed.

    Returns `changed`, `skipped` and `skipped_states` ({state: how many were skipped in it},
    so the page can say why nothing changed)."""
    sources = TRANSITIONS[action][0]
    changed, skipped_states = 0, {}
    rows = Scenario.objects.filter(pk__in=list(scenario_ids)).only("pk", "state").order_by("pk")
    for scenario in rows:
        if scenario.state not in sources:
            skipped_states[scenario.state] = skipped_states.get(scenario.state, 0) + 1
            continue
        try:
            transition(scenario, author, action, comment)
            changed += 1
        except TransitionError:
            current = Scenario.objects.filter(pk=scenario.pk).values_list("state", flat=True)
            state = current.first() or scenario.state
            skipped_states[state] = skipped_states.get(state, 0) + 1
    skipped = sum(skipped_states.values())
    return {"changed": changed, "skipped": skipped, "skipped_states": skipped_states}


def add_comment(scenario: Scenario, author, body: str) -> ReviewComment:
    if not body.strip():
        raise TransitionError("the comment is empty")
    return ReviewComment.objects.create(scenario=scenario, author=author, body=body.strip())


def _as_text(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=1)


def revision_diffs(revision: Revision, previous: Revision | None) -> list[dict]:
    """What a revision changed, field by field (unified diff lines, headers dropped); the first
    revision shows every field."""
    before = previous.snapshot if previous else {}
    diffs = []
    for field in SNAPSHOT_FIELDS:
        old, new = before.get(field), revision.snapshot.get(field)
        if previous is not None and old == new:
            continue
        lines = difflib.unified_diff(
            _as_text(old if old is not None else "").splitlines(),
            _as_text(new if new is not None else "").splitlines(),
            lineterm="",
            n=2,
        )
        diffs.append({"field": field, "lines": list(lines)[2:]})
    return diffs
