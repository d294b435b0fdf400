"""Make the project's module_utils and library importable the way Ansible sees them."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

for p in (ROOT / "module_utils", ROOT / "library"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

# Modules import `ansible.module_utils.triton_fleet.*`; point that package at ours.
import ansible.module_utils  # noqa: E402

if str(ROOT / "module_utils") not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(str(ROOT / "module_utils"))
