"""DRF request parsers for every API endpoint (REST_FRAMEWORK's DEFAULT_PARSER_CLASSES).

DRF's JSONParser turns a ValueError from `json.load` into a 400 ParseError, but a body nested
deeper than Python's recursion limit (100,000 `[`, say) raises RecursionError, which escaped as a
500 from any endpoint, the anonymous token endpoint included.
"""

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser; a body nested too deeply is a 400 like any other malformed JSON."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None


# DRF's defaults, with the JSON parser above.
DEFAULT = (JSONParser, parsers.FormParser, parsers.MultiPartParser)
