"""Hypothesis strategies for kio's types that ``st.from_type`` cannot draw as the wire can carry
them; registered on import (tests/wire/conftest.py, and the live fuzz of a partition)."""

import datetime

from hypothesis import strategies as st
from kio.static.primitive import Records, TZAware, i64Timedelta

# kio's generated classes resolve with st.from_type, except the raw record-batch bytes of Fetch.
st.register_type_strategy(Records, st.binary(max_size=32).map(Records))

# kio's encoder goes through float seconds, exact only within 2**53 microseconds (~285 years), and
# its decoder refuses durations beyond datetime.timedelta's range (test_connection.py): its own
# strategy reaches both, real durations (OffsetCommit's retention time) neither.
_EXACT_MS = 2**53 // 1000
st.register_type_strategy(
    i64Timedelta,
    st.integers(-_EXACT_MS, _EXACT_MS).map(
        lambda ms: i64Timedelta.parse(datetime.timedelta(milliseconds=ms))
    ),
)

# kio draws TZAware instants in any time zone, and one at an ambiguous local time (a daylight
# saving fold, e.g. 1995-09-23 23:00 in Europe/Tiraspol) never compares equal to the same
# instant decoded in UTC: Python compares such times across zones as unequal (PEP 495). The
# wire carries the instant alone, so draw instants in UTC, in kio's range for TZAware (whole
# seconds from the epoch up to datetime's last year).
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_LAST_S = int((datetime.datetime(9999, 12, 31, tzinfo=datetime.UTC) - _EPOCH).total_seconds())
st.register_type_strategy(
    TZAware,
    st.integers(0, _LAST_S).map(lambda s: TZAware.parse(_EPOCH + datetime.timedelta(seconds=s))),
)
