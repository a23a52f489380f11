"""tests/ts/verify: the exhaustive checker, its broken-schedule corpus and mutation test.

The directory is put on ``sys.path`` so the tests import ``verify_schedules`` and the
``broken`` package directly."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
