import sys
from pathlib import Path

# tests/ holds small helpers (a fake NVML) imported by name
sys.path.insert(0, str(Path(__file__).parent))
