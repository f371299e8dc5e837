"""The report commands: ``python -m reports report|compare ...`` (see ``reports.run_report``)."""

import sys

from reports.run_report import main

if __name__ == "__main__":
    sys.exit(main())
