"""When to send a request again, and how long to wait first.

Only what is safe is retried:

- a refusal that says nothing was taken and passes with time (429 ``overloaded`` or ``quota_exceeded``,
  503 ``not_ready``), after the ``Retry-After`` the server sent (or a backoff when it sent none);
- a request that never reached the server (``ConnectError``);
- a request whose answer was lost (``ConnectionLostError``) only when sending it twice does no harm: reads,
  and questions (a question changes nothing). A lost push is settled by ``push`` itself from the session's
  sequence numbers, never by sending it blindly again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional

from .errors import APIError, ConnectError, RefusedError, TransportError

__all__ = ["RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """How a client retries.

    ``max_retries`` bounds the retries of one request (of one batch, for a push). Waits grow from ``backoff``
    seconds, doubling up to ``max_backoff``, with full jitter so that many clients refused at once do not come
    back at once. A ``Retry-After`` is honoured as given (plus up to 10% jitter); one longer than
    ``max_retry_after`` seconds is not waited out and the refusal is raised (a tenant over its sessions quota
    is told 60 s: a caller should hear that rather than hang).
    """

    max_retries: int = 5
    backoff: float = 0.25
    max_backoff: float = 8.0
    max_retry_after: float = 30.0
    jitter: bool = True

    @classmethod
    def disabled(cls) -> "RetryPolicy":
        """No retries at all: every failure is raised at once."""
        return cls(max_retries=0)

    def backoff_delay(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (0 for the first) when the server named none."""
        ceiling = min(self.max_backoff, self.backoff * (2**attempt))
        return random.uniform(0.0, ceiling) if self.jitter else ceiling

    def delay_for(self, failure: BaseException, attempt: int, *, repeatable: bool) -> Optional[float]:
        """Seconds to wait before retrying after ``failure`` (``attempt`` retries done so far), or ``None``
        when it must not be retried. ``repeatable``: the request may be sent twice without harm."""
        if attempt >= self.max_retries:
            return None
        if isinstance(failure, RefusedError):
            if failure.retry_after is None:
                return self.backoff_delay(attempt)
            if failure.retry_after > self.max_retry_after:
                return None
            extra = random.uniform(0.0, min(1.0, 0.1 * failure.retry_after)) if self.jitter else 0.0
            return failure.retry_after + extra
        if isinstance(failure, APIError):
            return None
        if isinstance(failure, ConnectError):
            return self.backoff_delay(attempt)
        if isinstance(failure, TransportError) and repeatable:
            return self.backoff_delay(attempt)
        return None
