from django.urls import path

from . import views

app_name = "annotation"
urlpatterns = [
    path("", views.home, name="home"),
    path("<int:campaign_id>/", views.rate, name="rate"),
    path("a/<uuid:key>/submit/", views.submit, name="submit"),
    path("a/<uuid:key>/skip/", views.skip, name="skip"),
]
