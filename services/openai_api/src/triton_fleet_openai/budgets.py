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

    def _entries(self, subject, now) -> list:
        """(time, tokens) of the subject within the window, oldest first."""
        window = self.spent[subject]
        while window and window[0][0] <= now - self.WINDOW:
            window.popleft()
        return list(window)

    def _add(self, subject, now, tokens):
        self._entries(subject, now)
        self.spent[subject].append((now, tokens))

    def retry_after(self, subject: str, rate_class: str) -> Optional[int]:
        """Seconds until the subject may send again, or None when it is within its budget."""
        limit = self.per_class.get(rate_class)
        if limit is None:
            return None
        now = self.clock()
        window = self._entries(subject, now)
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
            self._add(subject, self.clock(), int(tokens))
