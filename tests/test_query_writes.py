"""How a page writes its view into the address (addresses.write_query), with the browser's copy of the address
late: the browser sends its copy with each run, and after fast presses that copy can predate the answer to the
previous run, so a value the copy already shows may still have to be sent."""

from __future__ import annotations

import pytest
from streamlit.runtime.state.query_params import QueryParams
from streamlit.testing.v1 import AppTest

PAGE = """
import streamlit as st
from explorer.app.pages import addresses
want = {key: value for key, value in (("a", st.session_state.get("a")), ("b", st.session_state.get("b"))) if value}
addresses.write_query(want, "sent", ("b",))
"""


@pytest.fixture
def messages(monkeypatch) -> list[dict[str, str]]:
    """The query strings the server sends the browser, in order."""
    sent: list[dict[str, str]] = []
    send = QueryParams._send_query_param_msg
    monkeypatch.setattr(QueryParams, "_send_query_param_msg",
                        lambda self: sent.append(dict(self._query_params)) or send(self))
    return sent


def _run(at: AppTest, **state: str | None) -> AppTest:
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception
    return at


def test_a_changed_value_is_sent_once(messages):
    at = _run(AppTest.from_string(PAGE), a="1")
    assert at.query_params["a"] == "1" and messages[-1] == {"a": "1"}
    messages.clear()
    _run(at)
    assert not messages, "nothing is sent when the address shows the view and nothing changed"


def test_a_value_the_late_copy_already_shows_is_sent_again(messages):
    at = _run(AppTest.from_string(PAGE), a="1")
    _run(at, a="2")
    messages.clear()
    at.query_params["a"] = "3"  # the browser's copy, sent with the next press, already as the page will be
    _run(at, a="3")
    assert messages and messages[-1]["a"] == "3", "the earlier a=2, arriving last, would be the address"
    messages.clear()
    _run(at)
    assert not messages


def test_a_key_taken_out_stays_out_when_the_late_copy_still_lacks_it(messages):
    at = _run(AppTest.from_string(PAGE), a="1", b="x")
    assert messages[-1] == {"a": "1", "b": "x"}
    messages.clear()
    del at.query_params["b"]  # the copy already without b, though the page's last message had it
    _run(at, b=None)
    assert messages and "b" not in messages[-1] and messages[-1]["a"] == "1"
    messages.clear()
    _run(at)
    assert not messages
