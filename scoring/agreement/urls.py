from django.urls import path, re_path

from scoring.agreement import exclusion_views, views

app_name = "scoring"
urlpatterns = [
    path("campaigns/<int:campaign_id>/agreement/", views.agreement_page, name="agreement"),
    path(
        "campaigns/<int:campaign_id>/agreement/exclusions/",
        exclusion_views.agreement_exclusions,
        name="agreement_exclusions",
    ),
    re_path(
        r"^campaigns/(?P<campaign_id>\d+)/agreement\.(?P<fmt>json|csv)$",
        views.agreement_export,
        name="agreement_export",
    ),
]
