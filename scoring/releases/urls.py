from django.urls import path, re_path

from scoring.releases import views

app_name = "releases"
urlpatterns = [
    path("", views.release_list, name="list"),
    path("new/", views.release_create, name="create"),
    path("<int:pk>/", views.release_detail, name="detail"),
    path("<int:pk>/versions/new/", views.version_create, name="version_create"),
    path("<int:pk>/compute/", views.release_compute, name="compute"),
    re_path(
        r"^(?P<pk>\d+)/leaderboard\.(?P<fmt>csv|json|md|differences\.csv|style\.csv)$",
        views.release_export,
        name="export",
    ),
]
