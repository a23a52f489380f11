"""tests/ts/groups: pipeline groups (issue 12 §3).  ``tests/ts/verify`` is put on ``sys.path`` for the
shared stand-in resources (``verify_schedules``) and the broken corpus (``broken.groups``)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "verify"))
