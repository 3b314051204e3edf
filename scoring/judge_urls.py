from django.urls import path  # noqa: F401 - patterns are added as the pages land

app_name = "judges"
urlpatterns = []
