import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "h2htalk.settings")
django_application = get_wsgi_application()

from annotation.hot_api import HotRatingApi  # noqa: E402 - needs the settings loaded
from h2htalk.redact import RedactSecrets  # noqa: E402

# The rating API's two hot endpoints answered beneath Django's request handling
# (annotation/hot_api.py); the set-password token leaves the URL before the server writes its
# access log.
application = RedactSecrets(HotRatingApi(django_application))
