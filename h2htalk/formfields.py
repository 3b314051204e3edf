"""Form fields shared by the pages."""

import re

from django import forms
from django.core.exceptions import ValidationError
from django.db import models

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
