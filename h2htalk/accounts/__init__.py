"""User accounts: onboarding from a CSV file, the page or the API (`onboarding`), roles and
deactivation (`roles`), one-time links to set a password (`links`)."""
