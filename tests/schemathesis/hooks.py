"""Schemathesis hooks for tests/testbed_api_fuzz.rs: the one rule of the testbed API that JSON Schema
cannot state.

A slot [start, end) and a window [from, to) must end after they start: two fields compared with each
other. Requests that break it are answered 400 invalid_time, which schemathesis's
positive_data_acceptance check would count as "a schema-valid request refused". Rather than
accepting 400 for every well-formed request (which would hide real mismatches between the document
and the service), such cases are dropped before they are sent. Both times must parse; anything else
is left for the service to refuse.
"""

from datetime import datetime

import schemathesis


def _instant(value):
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else None


def _ends_after_start(data, first, last):
    if not isinstance(data, dict):
        return True
    a, b = _instant(data.get(first)), _instant(data.get(last))
    return a is None or b is None or b > a


@schemathesis.hook
def filter_body(ctx, body):
    return _ends_after_start(body, "start", "end")


@schemathesis.hook
def filter_query(ctx, query):
    return _ends_after_start(query, "from", "to") and _ends_after_start(query, "start", "end")
