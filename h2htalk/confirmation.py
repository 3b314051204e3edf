"""Confirmation of destructive actions, held on the server so it works without JavaScript.

A destructive POST that does not carry `confirmed=1` changes nothing: the view answers with
`ask`, a page saying what is about to happen, whose Confirm button posts the same fields again
with confirmed=1 and whose Cancel goes back. Forms of such actions carry `data-confirm` (the
question) and the danger style; static/js/app.js asks that question with the browser's own
dialog and adds confirmed=1 itself, so with scripts on the extra page is skipped.
"""

from dataclasses import dataclass

from django.shortcuts import render

FIELD = "confirmed"
_NOT_REPEATED = {FIELD, "csrfmiddlewaretoken"}


@dataclass(frozen=True)
class Question:
    """What the confirmation says: `title` asks, `consequence` says what will happen,
    `confirm` labels the button that does it."""

    title: str
    consequence: str
    confirm: str

    @property
    def prompt(self) -> str:
        """The whole question in one string, for the browser's confirm dialog."""
        return f"{self.title}\n\n{self.consequence}"


def confirmed(request) -> bool:
    return request.POST.get(FIELD) == "1"


def ask(request, question: Question, cancel_url: str):
    """The confirmation page for this POST: its fields, posted again with confirmed=1."""
    fields = [
        (name, value)
        for name, values in request.POST.lists()
        if name not in _NOT_REPEATED
        for value in values
    ]
    context = {
        "question": question,
        "fields": fields,
        "action": request.get_full_path(),
        "cancel_url": cancel_url,
    }
    return render(request, "confirm.html", context)
