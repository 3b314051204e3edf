from django import forms
from django.contrib.auth.forms import SetPasswordForm
from django.utils.translation import gettext_lazy as _

from h2htalk import uploads


class UsersFileForm(forms.Form):
    file = forms.FileField(
        label=_("Users CSV"),
        help_text=_(
            "Columns username,email,role,campaigns (campaigns: names or ids separated "
            "by ';'). All rows or none are taken."
        ),
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if problem := uploads.size_error(upload):
            raise forms.ValidationError(problem)
        return upload


class NewPasswordForm(SetPasswordForm):
    """Django's set-password form with the password rules' errors under the password itself
    (Django puts them under the repeat field); a mismatch stays under the repeat field."""

    def clean(self):
        self.validate_passwords("new_password1", "new_password2")
        if not self.has_error("new_password2"):
            self.validate_password_for_user(self.user, "new_password1")
        return forms.Form.clean(self)
