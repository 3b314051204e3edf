"""The Chinese browser tests cover every page: each route of the URL conf outside the API and
Django's own admin is rendered by one of them, or listed as no page of its own with a reason
(tests/browser/researcher_pages.py). A new route fails here until it is sorted."""

from django.urls import reverse

from tests.browser import researcher_pages as pages


def test_every_route_is_rendered_in_chinese_or_excluded_with_a_reason():
    sorted_names = set(pages.VISITED) | set(pages.ANNOTATOR_PAGES) | set(pages.EXCLUDED)
    unsorted = [
        f"{route} ({name})"
        for route, name in pages.routes()
        if not route.startswith(pages.OUTSIDE) and name not in sorted_names
    ]
    assert not unsorted, (
        "routes no Chinese browser test renders: add them to VISITED (with the objects their "
        "URL needs) or to EXCLUDED with the reason in tests/browser/researcher_pages.py:\n  "
        + "\n  ".join(unsorted)
    )


def test_the_lists_name_only_existing_routes_each_once_and_give_reasons():
    names = {name for route, name in pages.routes() if name}
    lists = (pages.VISITED, pages.ANNOTATOR_PAGES, pages.EXCLUDED)
    listed = [name for listing in lists for name in listing]
    assert len(listed) == len(set(listed)), "a route is in two lists"
    assert set(listed) <= names, f"no such route: {sorted(set(listed) - names)}"
    assert all(reason.strip() for reason in pages.EXCLUDED.values())


def test_the_walk_sees_nested_namespaces():
    found = dict((name, route) for route, name in pages.routes())
    assert found["scoring:agreement"] == "scoring/campaigns/<int:campaign_id>/agreement/"
    assert reverse("scoring:agreement", args=[1]) == "/scoring/campaigns/1/agreement/"
