from django.urls import path

from . import api

urlpatterns = [
    path("", api.study_link, name="campaign-study"),
    path("rotate/", api.study_rotate, name="campaign-study-rotate"),
    path("participants/", api.study_participants, name="campaign-study-participants"),
]
