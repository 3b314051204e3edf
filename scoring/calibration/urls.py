from django.urls import path

from scoring.calibration import views

app_name = "calibration"
urlpatterns = [
    path("", views.calibration_list, name="list"),
    path("new/", views.calibration_create, name="create"),
    path("import/", views.calibration_import, name="import"),
    path("route/", views.calibration_route, name="route"),
    path("metrics/", views.calibration_metrics, name="metrics"),
    path("<int:pk>/", views.calibration_detail, name="detail"),
    path("<int:pk>/download/", views.calibration_download, name="download"),
]
