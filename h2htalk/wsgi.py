import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "h2htalk.settings")
from h2htalk.redact import RedactSecrets

# the set-password token leaves the URL before the server writes its access log
application = RedactSecrets(get_wsgi_application())
