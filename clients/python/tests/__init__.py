"""Tests of aoi_client against a live `aoi serve` (see support.py); run from clients/python:
python3 -m unittest discover --start-directory tests --top-level-directory ."""

import sys
from pathlib import Path

# The package under test is the source tree's, whatever is installed.
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
if _PACKAGE_ROOT not in sys.path:
    sys.path.insert(0, _PACKAGE_ROOT)
