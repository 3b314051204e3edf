"""The API's content negotiation answers as DRF's own does, for the common Accept headers it
short-cuts and for the others it hands to DRF."""

import pytest
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from h2htalk.negotiation import ContentNegotiation

RENDERERS = [JSONRenderer(), BrowsableAPIRenderer()]


@pytest.mark.parametrize(
    "accept, query",
    [
        (None, ""),
        ("*/*", ""),
        ("application/json", ""),
        ("text/html", ""),
        ("text/html,application/xhtml+xml,*/*;q=0.8", ""),
        ("application/json; indent=4", ""),
        ("*/*", "?format=api"),
        ("*/*", "?format=json"),
    ],
)
def test_the_same_renderer_and_media_type_as_drfs_negotiation(accept, query):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(APIRequestFactory().get("/api/rate/campaigns/" + query, **headers))
    ours = ContentNegotiation().select_renderer(request, RENDERERS)
    drfs = DefaultContentNegotiation().select_renderer(request, RENDERERS)
    assert (type(ours[0]), ours[1]) == (type(drfs[0]), drfs[1])
