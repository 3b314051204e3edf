from django.urls import path

from . import views

app_name = "study"
urlpatterns = [
    path("join/<str:link_token>/", views.join, name="join"),
    path("study/", views.step, name="step"),
    path("study/consent/", views.consent, name="consent"),
]
