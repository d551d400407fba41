"""Entry point: `python -m pjrt.cts --plugin NAME_OR_PATH [pytest args]`."""

import sys

from pjrt.cts import runner

if __name__ == "__main__":
  sys.exit(runner.main())
