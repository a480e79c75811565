"""Cron expressions for "every N seconds" (procrastinate's cron, through croniter, takes
seconds as a sixth field)."""

from __future__ import annotations

#: Periods a cron field can express evenly (divisors of 60).
_EVEN = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)


def every(seconds: float) -> str:
    """The cron of the nearest even period at or below `seconds`: under a minute a
    divisor of 60 seconds (`* * * * * */5`), else whole minutes that divide an hour
    (`*/2 * * * *`), else hours."""
    if seconds < 60:
        step = max(s for s in _EVEN if s <= max(seconds, 1))
        return f"* * * * * */{step}"
    minutes = int(seconds // 60)
    if minutes < 60:
        step = max(m for m in _EVEN if m <= minutes)
        return "* * * * *" if step == 1 else f"*/{step} * * * *"
    hours = (
        max(h for h in (1, 2, 3, 4, 6, 8, 12) if h <= seconds // 3600) if seconds < 86400 else 24
    )
    return "0 * * * *" if hours == 1 else ("0 0 * * *" if hours == 24 else f"0 */{hours} * * *")


__all__ = ["every"]
