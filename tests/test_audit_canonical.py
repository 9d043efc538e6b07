"""The audit log's fast encoder writes exactly the canonical bytes `policyc audit verify` hashes
again (runtime/audit.py, canonical_record), whatever the record holds."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from policyc.runtime.audit import canonical, canonical_record, jsonable

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()  # past 64 bits too
    | st.integers(min_value=-(2**63), max_value=2**64)
    | st.floats()  # NaN and the infinities too: jsonable writes them as text
    | st.floats(min_value=1e-10, max_value=1e-3)  # where orjson writes floats otherwise
    | st.sampled_from([1e16, 1e-5, -0.0, 5e-324, 1.7976931348623157e308, 123456789012345680.0, 0.1])
    | st.text()  # lone surrogates, control characters and any other code point
    | st.text(alphabet=st.characters(max_codepoint=0x7F))
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_the_fast_encoder_writes_the_canonical_bytes(value: object) -> None:
    record = jsonable(value)
    assert _written(canonical_record, record) == _written(canonical, record)


def _written(encode: object, record: object) -> object:
    """The bytes, or the error (a lone surrogate has no UTF-8: neither writes it)."""
    try:
        return encode(record)  # type: ignore[operator]
    except UnicodeEncodeError as error:
        return type(error)


def test_the_values_orjson_writes_otherwise_are_written_by_the_standard_library() -> None:
    for value in (2**64, -(2**63) - 1, 1e16, 1e-7, 1.5e-5, 3e-9, {"é": "\x1f\x7f\u2028"}, [math.pi, -0.0]):
        record = jsonable({"value": value, "code": "rule-failed", "text": "0.00001 and 1e-5"})
        assert canonical_record(record) == canonical(record)
