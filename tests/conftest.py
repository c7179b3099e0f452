import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TINYSPEC_CACHE", str(ROOT / ".cache" / "tinyspec"))
