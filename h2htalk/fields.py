"""DRF fields shared by the APIs."""

from rest_framework import serializers


class SlugRelatedField(serializers.SlugRelatedField):
    """DRF's SlugRelatedField, refusing a NUL character before it reaches a query (PostgreSQL
    cannot hold one in text and would answer with an error, not "no such object")."""

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value="(a NUL character)")
        return super().to_internal_value(data)
