"""The import preview's per-file notes (scenarios.import_notes) for templates."""

from django import template

from scenarios import import_notes

register = template.Library()
register.filter("file_reports", import_notes.file_reports)
register.filter("file_holds", import_notes.holds)
register.filter("file_needs", import_notes.needs)
