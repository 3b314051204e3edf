"""DRF's content negotiation (REST_FRAMEWORK's DEFAULT_CONTENT_NEGOTIATION_CLASS), answering the
common case without parsing and ranking the Accept header on every request."""

from rest_framework.negotiation import DefaultContentNegotiation


class ContentNegotiation(DefaultContentNegotiation):
    """A request that names no format and accepts anything (no Accept header, or */*) or
    exactly the first renderer's media type gets the first renderer with its media type, as
    DRF's own negotiation answers it; any other request is negotiated by DRF."""

    def select_renderer(self, request, renderers, format_suffix=None):
        first = renderers[0]
        accept = request.META.get("HTTP_ACCEPT", "*/*")
        if (
            format_suffix is None
            and accept in ("*/*", first.media_type)
            and self.settings.URL_FORMAT_OVERRIDE not in request.query_params
        ):
            return first, first.media_type
        return super().select_renderer(request, renderers, format_suffix)
