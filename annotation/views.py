from django.shortcuts import render

from h2htalk.roles import ANNOTATOR, role_required


@role_required(ANNOTATOR)
def home(request):
    """The annotator's landing page: the campaigns they rate in."""
    return render(request, "annotation/home.html", {"campaigns": []})
