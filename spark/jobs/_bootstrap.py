"""Puts the repository root first on sys.path, for a job run as a script.

spark-submit (like `python spark/jobs/<job>.py`) puts only the script's own directory on
sys.path; with this, a checkout without an installed ems[spark] still finds the ems and
spark packages at the repository root. Each job imports it only when run as a script.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
