import datetime

from hypothesis import strategies as st
from kio.static.primitive import Records, i64Timedelta

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
