from django.urls import path

from scoring.calibration import api
from scoring.metrics import api as metrics_api

urlpatterns = [
    path("judges/", api.CalibratedJudgeList.as_view(), name="calibration-judge-list"),
    path("judges/import/", api.CalibratedJudgeImport.as_view(), name="calibration-judge-import"),
    path(
        "judges/<int:pk>/", api.CalibratedJudgeDocument.as_view(), name="calibration-judge-detail"
    ),
    path(
        "judges/<int:pk>/score/", api.CalibratedJudgeScore.as_view(), name="calibration-judge-score"
    ),
    path("route/", api.RouteComparisons.as_view(), name="calibration-route"),
    path("metrics/", metrics_api.MetricsJobStart.as_view(), name="calibration-metrics"),
]
