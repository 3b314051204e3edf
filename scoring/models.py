"""The scoring app's models, one module per concern (Django finds them through this module)."""

from scoring.agreement.models import AgreementReport
from scoring.calibration.models import CalibratedJudge
from scoring.judges.models import JudgeConfig, JudgeRun, JudgeVerdict
from scoring.metrics.models import MetricScore
from scoring.releases.models import Release, ReleaseResult

__all__ = [
    "AgreementReport",
    "CalibratedJudge",
    "JudgeConfig",
    "JudgeRun",
    "JudgeVerdict",
    "MetricScore",
    "Release",
    "ReleaseResult",
]
