from django.urls import path

from . import views
from .qualification import views as practice

app_name = "annotation"
urlpatterns = [
    path("", views.home, name="home"),
    path("<int:campaign_id>/", views.rate, name="rate"),
    path("<int:campaign_id>/support/", views.support, name="support"),
    path("care/", views.care_settings, name="care"),
    path("a/<uuid:key>/submit/", views.submit, name="submit"),
    path("a/<uuid:key>/skip/", views.skip, name="skip"),
    path("a/<uuid:key>/rather-not/", views.rather_not, name="rather_not"),
    # Qualification and refresher practice (annotation.qualification)
    path("<int:campaign_id>/qualify/", practice.qualify, name="qualify"),
    path("<int:campaign_id>/qualify/retry/", practice.retry, name="practice_retry"),
    path("q/<uuid:practice_key>/", practice.feedback, name="practice_feedback"),
    path("q/<uuid:practice_key>/answer/", practice.answer, name="practice_answer"),
]
