"""Idle polling: an event loop that keeps turning, without sleeping, for a while after work.

Why: an event loop with nothing ready sleeps in ``epoll_wait``, and the request that ends the
sleep pays for it twice. The sender's write must wake the sleeping thread (on a virtual machine
an interrupt to another virtual CPU, which the hypervisor delivers), and the woken thread runs
its first microseconds with cold caches. A partition whose group commits back to back sleeps
between most turns. On this project's 2-core virtual machine a message and its answer over a
Unix socket cost the sender 14.5 µs of CPU when the other side slept and 6.3 when it polled,
and a partition fed one commit at a time answered 7,100–7,500 commits/s sleeping against
11,000–14,000 polling for 50–200 µs, at no more CPU a commit (bench/wire-findings.md, "Idle
polling"). Seastar, which Redpanda's Kafka broker runs on, polls the same way
(``--idle-poll-time-us``, 200 µs by default).

Theory of operation
-------------------
``IdlePoll(schedule, budget_s)``: ``worked()`` is called at the end of every loop turn that did
work (``PartitionRuntime._end_turn``). It moves the deadline to ``budget_s`` from now and, unless
a poll is running, schedules ``_poll`` with ``schedule`` (the loop's ``call_soon``). A loop with
a callback ready polls its sockets without waiting (epoll with a zero timeout) before running
it, so while ``_poll`` keeps scheduling itself the loop never sleeps; new requests are read in
the next turn. Once a turn of ``_poll`` finds the deadline passed, it stops and the loop sleeps
as usual. Each turn of ``_poll`` is one clock read and one ``call_soon`` (about 0.75 µs of CPU
here), so polling costs at most ``budget_s`` of one core after each burst of work, and nothing
while idle. ``budget_s`` 0: never polls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# The longest poll after work a deployment may ask for: a setting past a few milliseconds
# only burns a core between requests that come further apart than any wake-up costs.
MAX_IDLE_POLL_US = 10_000


def check_idle_poll_us(value: Any, name: str) -> int:
    """``value`` if it is an int in [0, MAX_IDLE_POLL_US]; ValueError naming ``name`` else."""
    if type(value) is not int or not 0 <= value <= MAX_IDLE_POLL_US:
        raise ValueError(f"{name} must be an int in [0, {MAX_IDLE_POLL_US}], got {value!r}")
    return value


class IdlePoll:
    """Keeps a loop turning for ``budget_s`` after each ``worked()`` (module docstring).
    ``schedule(callback)`` runs ``callback`` in the loop's next turn; ``clock`` gives seconds.
    Loop thread only."""

    def __init__(
        self,
        schedule: Callable[[Callable[[], None]], Any],
        budget_s: float,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._schedule = schedule
        self.budget_s = budget_s
        self._clock = clock
        self._until = 0.0
        self.polling = False
        self.turns = 0  # turns of _poll so far (for tests and benchmarks)

    def worked(self) -> None:
        if self.budget_s <= 0:
            return
        self._until = self._clock() + self.budget_s
        if not self.polling:
            self.polling = True
            self._schedule(self._poll)

    def _poll(self) -> None:
        self.turns += 1
        if self._clock() < self._until:
            self._schedule(self._poll)
        else:
            self.polling = False
