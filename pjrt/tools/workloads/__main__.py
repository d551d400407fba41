"""`python -m pjrt.tools.workloads`: see runner.py."""

import sys

from pjrt.tools.workloads import runner

if __name__ == "__main__":
  sys.exit(runner.main())
