"""Training and qualification (issue 22): practice comparisons with known answers before an
annotator's votes count, and a refresher set for those who drift while rating.

The public entry point is `phase(campaign, user)` (annotation.qualification.phases), which
other features (the crowd join flow, the rating page) call to tell where an annotator stands.
Modules: `models` (rows), `phases` (the phase and standing), `practice` (attempts, answers,
the pass rule), `watch` (the drift watch after each judgment), `manage` (what researchers
define: rule, items, import; the monitoring rows), and the pages and APIs beside them.
"""

from .phases import Phase, phase

__all__ = ["Phase", "phase"]
