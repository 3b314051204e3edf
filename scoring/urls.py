from django.urls import path, re_path

from . import views

app_name = "scoring"
urlpatterns = [
    path("campaigns/<int:campaign_id>/agreement/", views.agreement_page, name="agreement"),
    re_path(
        r"^campaigns/(?P<campaign_id>\d+)/agreement\.(?P<fmt>json|csv)$",
        views.agreement_export,
        name="agreement_export",
    ),
]
