"""Token budgets per subject: tokens per minute (prompt + completion) by the subject's rate class."""

import collections
import math
import time
from typing import Optional


class Budgets:
    """Sliding 60 s window per subject. A class absent from ``per_class`` has no budget."""

    WINDOW = 60.0

    def __init__(self, per_class: Optional[dict[str, int]] = None, clock=time.monotonic):
        self.per_class = {str(k): int(v) for k, v in (per_class or {}).items()}
        self.clock = clock
        self.spent = collections.defaultdict(collections.deque)  # subject -> deque[(t, tokens)]

    def _trim(self, subject, now):
        window = self.spent[subject]
        while window and window[0][0] <= now - self.WINDOW:
            window.popleft()
        return window

    def retry_after(self, subject: str, rate_class: str) -> Optional[int]:
        """Seconds until the subject may send again, or None when it is within its budget."""
        limit = self.per_class.get(rate_class)
        if limit is None:
            return None
        now = self.clock()
        window = self._trim(subject, now)
        total = sum(n for _, n in window)
        if total < limit:
            return None
        # The budget frees up as the oldest entries leave the window.
        for t, n in window:
            total -= n
            if total < limit:
                return max(1, math.ceil(t + self.WINDOW - now))
        return int(self.WINDOW)

    def record(self, subject: str, rate_class: str, tokens: int):
        if rate_class in self.per_class and tokens > 0:
            now = self.clock()
            self._trim(subject, now).append((now, tokens))
