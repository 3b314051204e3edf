"""The POST cancel and resume actions of a background run's API (generation runs, judge runs):
one way to answer them, each kind of run bringing its own rules."""

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.response import Response


class CancelResumeActions:
    """Mixin for a run viewset. The viewset defines `request_cancel(run)`, `queue(run)` and
    `resume_refusal(run)` (why the run cannot be resumed now, or None), and may define
    `cancel_refusal(run)`; both actions answer with the run as it is afterwards (the viewset's
    serializer), a refusal with 409."""

    def cancel_refusal(self, run) -> str | None:
        return None

    @extend_schema(request=None, summary="Cancel the run")
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None, **kwargs):
        run = self.get_object()
        refusal = self.cancel_refusal(run)
        if refusal:
            return Response({"detail": refusal}, status=409)
        self.request_cancel(run)
        return self._current(run)

    @extend_schema(request=None, summary="Resume the run")
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None, **kwargs):
        run = self.get_object()
        refusal = self.resume_refusal(run)
        if refusal:
            return Response({"detail": refusal}, status=409)
        self.queue(run)
        return self._current(run)

    def _current(self, run) -> Response:
        run.refresh_from_db()
        return Response(self.get_serializer(run).data)
