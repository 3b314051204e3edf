from rest_framework import routers

from scoring.releases.api import ReleaseViewSet

# A SimpleRouter: the project's router owns the API root (no second "api-root" name).
router = routers.SimpleRouter()
router.register("", ReleaseViewSet, basename="release")

urlpatterns = router.urls
