"""PJRT conformance suite: black-box tests any PJRT plugin can be run against.

    python -m pjrt.cts --plugin NAME_OR_PATH [pytest args...]

The test modules are `pjrt/cts/*_cts.py` (named so that the repository's
own test discovery leaves them alone: they need a plugin under test).
"""

from pjrt.cts.runner import main as main
from pjrt.cts.runner import run as run
from pjrt.cts.runner import suite_modules as suite_modules
