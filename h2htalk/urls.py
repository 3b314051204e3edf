from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.decorators.cache import cache_control
from django.views.i18n import JavaScriptCatalog
from drf_spectacular.views import SpectacularAPIView

from . import language, views
from .accounts import views as accounts
from .auth import AdminLoginForm, LoginView

# Error pages in the site's layout (h2htalk/errors.py); the API keeps DRF's JSON errors.
handler403 = "h2htalk.errors.permission_denied"
handler404 = "h2htalk.errors.page_not_found"
handler500 = "h2htalk.errors.server_error"

# The admin's login answers a lock-out like the site's (both go through the same throttle).
admin.site.login_form = AdminLoginForm

urlpatterns = [
    # First: most requests are the rating API's (h2htalk.api_urls puts its endpoints first).
    path("api/", include("h2htalk.api_urls")),
    path("", views.home, name="home"),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("language/", language.set_language, name="set_language"),
    # The scripts' strings (static/js: gettext()), in the request's language; base.html names the
    # language in the address, so a browser's cached copy is never another language's.
    path(
        "jsi18n/",
        cache_control(max_age=3600, private=True)(JavaScriptCatalog.as_view()),
        name="javascript_catalog",
    ),
    path("manage/", accounts.admin_home, name="admin_home"),
    path("manage/users/create/", accounts.create_users, name="create_users"),
    path("manage/users/<int:user_id>/roles/", accounts.set_roles, name="set_roles"),
    path("manage/users/<int:user_id>/active/", accounts.set_active, name="set_active"),
    path("manage/users/<int:user_id>/revoke-links/", accounts.revoke_links, name="revoke_links"),
    path("manage/users/<int:user_id>/new-link/", accounts.new_link, name="new_link"),
    path(
        "password/set/<uidb64>/<token>/",
        accounts.SetPasswordView.as_view(),
        name="password_set",
    ),
    path("jobs/<int:pk>/", views.job_detail, name="job_detail"),
    path("jobs/<int:pk>/progress/", views.job_progress, name="job_progress"),
    path("scenarios/", include("scenarios.urls")),
    path("companions/", include("scenarios.companions.urls")),
    path("rate/", include("annotation.urls")),
    path("", include("annotation.study.urls")),  # /join/<token>/ and the participant's pages
    path("campaigns/", include("annotation.campaign_urls")),
    path("scoring/", include("scoring.agreement.urls")),
    path("planning/", include("scoring.planning.urls")),
    path("judges/", include("scoring.judges.urls")),
    path("calibration/", include("scoring.calibration.urls")),
    path("releases/", include("scoring.releases.urls")),
    path("datasets/", include("scoring.hfexport.urls")),
    path("webhooks/", include("webhooks.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("api/docs/", views.api_docs, name="api_docs"),
    path("django-admin/", admin.site.urls),
]
