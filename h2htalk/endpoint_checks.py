"""Checks that companion and judge endpoint settings share, on their edit pages and in the API.
Request parameters may not include keys the platform sets itself. The API key is given as the
NAME of an environment variable, never as the key. Both raise Django's ValidationError; forms
report it on the field, and DRF serializers turn it into a 400."""

from django.core.exceptions import ValidationError

COMPANION_PLATFORM_PARAMS = frozenset({"model", "messages", "stream"})


def clean_params(value, platform_keys=COMPANION_PLATFORM_PARAMS) -> dict:
    """Request parameters: a JSON object (empty or null: none) without `platform_keys`."""
    value = value or {}  # (a form-encoded "null" arrives as None: a NOT NULL column)
    if not isinstance(value, dict):
        raise ValidationError("Give a JSON object.")
    forbidden = set(platform_keys) & set(value)
    if forbidden:
        raise ValidationError(f"{sorted(forbidden)} are set by the platform.")
    return value


def clean_key_env(name) -> str:
    """The name of the environment variable that holds the key (empty: no key)."""
    name = (name or "").strip()
    if name and not name.replace("_", "").isalnum():
        raise ValidationError(
            "Give the NAME of an environment variable (letters, digits, _), not the key."
        )
    return name
