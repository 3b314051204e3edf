"""Serializers every API module shares (one schema component per shape)."""

from rest_framework import serializers

from h2htalk import egress, endpoint_checks


class ErrorSerializer(serializers.Serializer):
    """The body of a 4xx answer: one readable message."""

    detail = serializers.CharField()


def form_errors(form) -> dict[str, list[str]]:
    """An invalid page form's errors as an API body: {field: [messages]} ("__all__" for the
    rules across fields), for the APIs that validate through the page's form."""
    return {
        name: [e["message"] for e in errors] for name, errors in form.errors.get_json_data().items()
    }


class EndpointValidation:
    """validate_* methods of an endpoint's API serializer (companions, judges): the same checks
    as its edit form, on the fields of h2htalk.models.EndpointConfig."""

    platform_params = endpoint_checks.COMPANION_PLATFORM_PARAMS

    def validate_base_url(self, value):
        """A host allowed by LLM_ALLOWED_ENDPOINTS (h2htalk.egress), as the model checks."""
        egress.validate_base_url(value)
        return value

    def validate_api_key_env(self, value):
        return endpoint_checks.clean_key_env(value)

    def validate_params(self, value):
        """A JSON object (null: none) without the keys the platform sets."""
        return endpoint_checks.clean_params(value, self.platform_params)
