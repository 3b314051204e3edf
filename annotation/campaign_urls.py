from django.urls import path  # noqa: F401 - patterns are added as the campaign pages land

app_name = "campaigns"
urlpatterns = []
