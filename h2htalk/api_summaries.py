"""One-line summaries of the API's operations, as the docs page (/api/docs/) lists them.

A viewset's standard actions get theirs from its resource's names ("List scenarios", "Show a
scenario"); other operations carry `extend_schema(summary=…)` where they are defined.
tests/scenarios/test_api.py checks that every operation of the schema has one.
"""

from drf_spectacular.utils import extend_schema, extend_schema_view

STANDARD = {
    "list": "List {plural}",
    "create": "Create a {singular}",
    "retrieve": "Show a {singular}",
    "update": "Replace a {singular}",
    "partial_update": "Change some fields of a {singular}",
    "destroy": "Delete a {singular}",
}


def summarised(singular: str, plural: str, **summaries: str):
    """Class decorator for a viewset: a summary for each standard action it has, from the
    resource's names, and the given ones (`create="Start a generation run"`) instead."""

    def decorate(viewset):
        texts = {
            name: text.format(singular=singular, plural=plural)
            for name, text in STANDARD.items()
            if hasattr(viewset, name)
        }
        texts.update(summaries)
        decorators = {name: extend_schema(summary=text) for name, text in texts.items()}
        return extend_schema_view(**decorators)(viewset)

    return decorate
