from django.urls import path

from . import views

app_name = "hfexport"
urlpatterns = [
    path("campaigns/<int:pk>/", views.campaign_dataset, name="campaign"),
    path("releases/<int:pk>/", views.release_dataset, name="release"),
]
