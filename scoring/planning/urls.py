from django.urls import path

from scoring.planning import views

app_name = "planning"
urlpatterns = [
    path("campaigns/<int:campaign_id>/", views.campaign_plan, name="campaign"),
    path("campaigns/<int:campaign_id>/status/", views.campaign_plan_status, name="status"),
]
