"""Serializers every API module shares (one schema component per shape)."""

from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    """The body of a 4xx answer: one readable message."""

    detail = serializers.CharField()
