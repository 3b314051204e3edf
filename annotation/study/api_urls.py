from django.urls import path

from . import api

urlpatterns = [
    path("", api.study_link, name="campaign-study"),
    path("rotate/", api.study_rotate, name="campaign-study-rotate"),
    path("close/", api.study_close, name="campaign-study-close"),
    path("open/", api.study_open, name="campaign-study-open"),
    path("participants/", api.study_participants, name="campaign-study-participants"),
]
