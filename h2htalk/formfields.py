"""Form fields shared by the pages."""

import re

from django import forms
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext

_WHOLE = re.compile(r"\s*[+-]?[0-9]+\s*")
LARGEST = 2**63 - 1  # the largest integer a database column holds (SQLite, PostgreSQL bigint)


def out_of_range(value) -> bool:
    """Is this a whole number (as a form would read it) that no database integer holds?"""
    text = str(value)
    return bool(_WHOLE.fullmatch(text)) and abs(int(text)) > LARGEST


class ModelMultipleChoiceField(forms.ModelMultipleChoiceField):
    """Django's ModelMultipleChoiceField, refusing an id past the database's integers as an
    invalid choice. (Django looks the ids up with `pk__in`; on SQLite a 20-digit one raised
    OverflowError, a 500, instead of "not a valid value".)"""

    def clean(self, value):
        key = self.queryset.model._meta.get_field(
            self.to_field_name or self.queryset.model._meta.pk.name
        )
        if isinstance(key, models.IntegerField) and isinstance(value, (list, tuple)):
            for pk in value:
                if out_of_range(pk):
                    raise ValidationError(
                        self.error_messages["invalid_pk_value"],
                        code="invalid_pk_value",
                        params={"pk": pk},
                    )
        return super().clean(value)


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field (Django's documented pattern): cleaned to a list."""

    MAX_FILES = 100

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        files = data if isinstance(data, list | tuple) else [data]
        files = [f for f in files if f] or [None]
        if len(files) > self.MAX_FILES:
            raise ValidationError(
                gettext("At most %(n)d files in one upload: put more in a zip.")
                % {"n": self.MAX_FILES}
            )
        return [super(MultipleFileField, self).clean(f, initial) for f in files]
