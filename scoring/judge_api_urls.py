from django.urls import path  # noqa: F401 - endpoints are added as they land

urlpatterns = []
