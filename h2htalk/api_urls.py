from django.urls import include, path
from rest_framework.authtoken.views import obtain_auth_token
from rest_framework.routers import DefaultRouter

from scenarios.api import PersonaViewSet, ScenarioViewSet

router = DefaultRouter()
router.register("scenarios", ScenarioViewSet, basename="scenario")
router.register("personas", PersonaViewSet, basename="persona")

urlpatterns = [
    path("token/", obtain_auth_token, name="api_token"),
    path("", include(router.urls)),
]
