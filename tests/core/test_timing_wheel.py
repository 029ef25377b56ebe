"""The hierarchical timing wheel against a reference model (a plain dict scanned for the minimum).

The model is obviously right and obviously slow; hypothesis drives both through the same
schedule/cancel/advance sequences, including clock jumps across every level and deadlines in the
past, and they must agree on every fired timer (order by deadline), every ``deadline_of`` and every
``next_deadline_ms``; ``wake_at_ms`` is never after the model's earliest deadline, and polling at
it fires every timer on time.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.timing_wheel import LEVEL_SPAN_MS, LEVELS, TimingWheel


class ModelTimer:
    def __init__(self) -> None:
        self.timers = {}

    def schedule(self, key, deadline_ms, payload=None):
        self.timers[key] = (deadline_ms, payload)

    def cancel(self, key):
        return self.timers.pop(key, None) is not None

    def due(self, now_ms):
        return {k: v for k, v in self.timers.items() if v[0] <= now_ms}

    def next_deadline_ms(self):
        return min((d for d, _ in self.timers.values()), default=None)


def drain(wheel, now_ms):
    fired = []
    while (item := wheel.pop_due(now_ms)) is not None:
        fired.append(item)
    return fired


keys = st.integers(0, 30)
deltas = st.one_of(
    st.integers(-5, 70),
    st.integers(-100, 5_000),
    st.sampled_from([LEVEL_SPAN_MS[i] + j for i in range(4) for j in (-1, 0, 1)]),
    st.integers(0, 10**12),
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), keys, deltas, st.one_of(st.none(), st.integers())),
        st.tuples(st.just("cancel"), keys),
        st.tuples(
            st.just("advance"),
            st.one_of(st.integers(0, 100), st.integers(0, 10**6), st.integers(0, 10**13)),
        ),
        st.tuples(st.just("peek")),
    ),
    max_size=80,
)


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 10**9), ops)
def test_wheel_agrees_with_model(start_ms, operations):
    wheel, model, now = TimingWheel(start_ms), ModelTimer(), start_ms
    for op in operations:
        if op[0] == "schedule":
            _, key, delta, payload = op
            wheel.schedule(key, now + delta, payload)
            model.schedule(key, now + delta, payload)
        elif op[0] == "cancel":
            assert wheel.cancel(op[1]) == model.cancel(op[1])
        elif op[0] == "advance":
            now += op[1]
            expected = model.due(now)
            fired = drain(wheel, now)
            assert {k: (d, p) for k, d, p in fired} == expected
            assert [d for _, d, _ in fired] == sorted(d for _, d, _ in fired)
            for key in expected:
                model.cancel(key)
        else:
            assert wheel.next_deadline_ms() == model.next_deadline_ms()
        wake, deadline = wheel.wake_at_ms(), model.next_deadline_ms()
        assert (wake is None) == (deadline is None)
        assert wake is None or wake <= deadline
        assert len(wheel) == len(model.timers)
        for key in range(31):
            entry = model.timers.get(key)
            assert wheel.deadline_of(key) == (None if entry is None else entry[0])


def test_rescheduling_a_key_replaces_its_deadline_and_payload():
    wheel = TimingWheel(0)
    wheel.schedule("a", 100, "first")
    wheel.schedule("a", 10)
    assert wheel.deadline_of("a") == 10 and len(wheel) == 1
    assert wheel.pop_due(9) is None
    assert wheel.pop_due(10) == ("a", 10, None)
    assert wheel.pop_due(10_000) is None and len(wheel) == 0


def test_timer_fires_when_now_equals_deadline():
    # DESIGN.md "Deliberate differences": now >= deadline, not Kafka's test clock's now > deadline.
    wheel = TimingWheel(0)
    wheel.schedule("k", 500)
    assert wheel.pop_due(499) is None
    assert wheel.pop_due(500) == ("k", 500, None)


def test_timers_armed_while_draining_are_seen_in_the_same_drain():
    wheel = TimingWheel(0)
    wheel.schedule("a", 5)
    wheel.schedule("b", 5)
    first = wheel.pop_due(5)
    wheel.schedule("c", 3)  # armed "in the past" by an action: fires next
    wheel.cancel("b" if first[0] == "a" else "a")  # an action cancels its sibling
    assert wheel.pop_due(5) == ("c", 3, None)
    assert wheel.pop_due(5) is None


def test_clock_jump_of_years_costs_no_per_tick_work():
    wheel = TimingWheel(0)
    for i in range(1_000):
        wheel.schedule(i, 10**12 + i)
    assert wheel.next_deadline_ms() == 10**12
    fired = drain(wheel, 10**13)
    assert [k for k, _, _ in fired] == list(range(1_000))
    # Buckets are touched a bounded number of times per timer, not per millisecond skipped:
    # the heap holds buckets only.
    assert len(wheel._heap) == 0 and len(wheel._buckets) == 0


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**12), st.lists(st.tuples(keys, deltas), min_size=1, max_size=40))
def test_polling_at_wake_times_fires_every_timer_at_its_deadline(start_ms, timers):
    # How the runtime aims its loop timer: wake at wake_at_ms(), pop what is due, aim again.
    wheel, model = TimingWheel(start_ms), ModelTimer()
    for key, delta in timers:
        deadline = start_ms + abs(delta)  # none in the past: each must fire at its deadline
        wheel.schedule(key, deadline)
        model.schedule(key, deadline)
    now, polls = start_ms, 0
    while (wake := wheel.wake_at_ms()) is not None:
        assert wake <= model.next_deadline_ms()
        now = max(now, wake)
        polls += 1
        for key, deadline, _ in drain(wheel, now):
            assert deadline == now and model.timers.pop(key)[0] == deadline
        # A poll that fires nothing consumed a bucket: polls are bounded by buckets, not time.
        assert polls <= len(timers) * (LEVELS + 1)
    assert model.timers == {}


def test_re_arming_timers_later_leaves_the_wake_time_where_it_was():
    # Members committing: each commit re-arms its session deadline. next_deadline_ms follows the
    # member due first, cascading buckets each time; wake_at_ms stays at the front bucket.
    wheel, session_ms = TimingWheel(0), 10_000
    for member in range(64):
        wheel.schedule(member, session_ms)
    first_wake = wheel.wake_at_ms()
    assert first_wake is not None and first_wake <= session_ms
    for now in range(1, 2_000):
        wheel.schedule(now % 64, now + session_ms)
        assert wheel.wake_at_ms() == first_wake
    assert wheel.next_deadline_ms() == 2_000 - 64 + session_ms
