"""A new directory per hypothesis example, all removed when the test process ends.

Function-scoped fixtures such as tmp_path are shared across a @given test's examples, so each
example makes its own directory; these used to be bare mkdtemp()s that every suite run left in
/tmp by the hundred."""
from __future__ import annotations

import atexit
import itertools
import shutil
import tempfile
from pathlib import Path

_root: Path | None = None
_counter = itertools.count()


def fresh_dir(prefix: str) -> Path:
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="tp-fuzz-"))
        atexit.register(shutil.rmtree, _root, True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{next(_counter)}-", dir=_root))
