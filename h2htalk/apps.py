from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "h2htalk"
    verbose_name = "Platform"

    def ready(self):
        from django.conf import settings
        from django.db.models.signals import post_migrate, post_save

        from . import (
            celery,  # noqa: F401  the app @shared_task binds to (see h2htalk/__init__)
            egress,
            language,  # noqa: F401  connects the login signal that applies a stored language
        )
        from .accounts.users import keep_username_key
        from .roles import ensure_role_groups

        post_migrate.connect(ensure_role_groups, sender=self)
        post_save.connect(keep_username_key, sender=settings.AUTH_USER_MODEL, weak=False)
        egress.policy()  # a malformed LLM_ALLOWED_ENDPOINTS stops start-up, naming the entry
