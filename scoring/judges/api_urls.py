from rest_framework import routers

from scoring.judges.api import JudgeConfigViewSet, JudgeRunViewSet, JudgeVerdictViewSet

# A SimpleRouter: the project's router owns the API root (no second "api-root" name).
router = routers.SimpleRouter()
router.register("configs", JudgeConfigViewSet, basename="judge-config")
router.register("runs", JudgeRunViewSet, basename="judge-run")
router.register("verdicts", JudgeVerdictViewSet, basename="judge-verdict")

urlpatterns = router.urls
