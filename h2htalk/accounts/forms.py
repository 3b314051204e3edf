from django import forms
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
