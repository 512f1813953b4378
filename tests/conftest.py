import os
import sys
import tempfile
from pathlib import Path

# tests/ holds small helpers (a fake NVML) imported by name
sys.path.insert(0, str(Path(__file__).parent))

# Never the user's store: every test run gets its own empty data directory
# (tests that need a database pass --db / db_path explicitly).
os.environ["ROOFTOP_HOME"] = tempfile.mkdtemp(prefix="rooftop-tests-")
os.environ.pop("ROOFTOP_DB", None)
