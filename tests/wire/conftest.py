from hypothesis import strategies as st
from kio.static.primitive import Records

# kio's generated classes resolve with st.from_type, except the raw record-batch bytes of Fetch.
st.register_type_strategy(Records, st.binary(max_size=32).map(Records))
