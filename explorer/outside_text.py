"""Text from outside the program (arguments, stdin lines, file contents, a checkpoint's metadata) made
valid Unicode or refused with one line, in one place.

Why: Python decodes argv with surrogateescape, so a Latin-1 terminal's "é" arrives as the lone surrogate
U+DCE9, and JSON's "\\ud800" escape gives a lone surrogate too. Such a string passes every length check
and then fails deep inside a library (`tokenizers`: "TextInputSequence must be str") or at the last
moment (`UnicodeEncodeError` while writing the checkpoint after the whole training ran).
"""

from __future__ import annotations

import argparse
from typing import Any, BinaryIO, Iterator

from explorer.errors import ExplorerError

MAX_LINE_BYTES = 100_000  # one line of stdin or of a file of pairs; a sentence is far shorter
_MAX_DEPTH = 64


def _detail(text: str, index: int) -> str:
    code = ord(text[index])
    what = f"the byte 0x{code - 0xDC00:02X}" if 0xDC80 <= code <= 0xDCFF else f"a lone surrogate U+{code:04X}"
    return f"{what} at character {index + 1:,}"


def valid_text(text: str, what: str) -> str:
    """`text` when it encodes as UTF-8; ExplorerError naming `what` and the first bad character otherwise."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ExplorerError(f"{what} is not valid UTF-8 text ({_detail(text, exc.start)}): "
                            "use UTF-8 (check the terminal's or the file's encoding)") from None
    return text


def decode(data: bytes, what: str) -> str:
    """Bytes from outside as text; ExplorerError naming `what` and the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExplorerError(f"{what} is not valid UTF-8 text (the byte 0x{data[exc.start]:02X} at byte "
                            f"{exc.start + 1:,})") from None


def valid_strings(value: Any, what: str, depth: int = 0) -> None:
    """ExplorerError when any string in parsed JSON (keys included) is not valid text."""
    if isinstance(value, str):
        valid_text(value, what)
    elif depth > _MAX_DEPTH:
        raise ExplorerError(f"{what} nests more than {_MAX_DEPTH} levels deep")
    elif isinstance(value, dict):
        for key, item in value.items():
            valid_text(str(key), f"a key of {what}")
            valid_strings(item, f"{what}.{key}" if len(what) + len(str(key)) < 80 else what, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            valid_strings(item, what, depth + 1)


def check_arguments(args: argparse.Namespace) -> None:
    """ExplorerError naming the first command-line argument that is not valid text."""
    for name, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                valid_text(item, "--" + name.replace("_", "-"))


def lines(stream: BinaryIO, max_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, str | ExplorerError]]:
    """(number from 1, text without its line ending) for each line of a byte stream, or an ExplorerError
    in place of the text for a line that is not UTF-8 or is over `max_bytes` (of such a line no more than
    that is held: the rest is skipped)."""
    number = 0
    while True:
        raw = stream.readline(max_bytes + 1)
        if not raw:
            return
        number += 1
        if len(raw) > max_bytes and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = stream.readline(1 << 20)
            yield number, ExplorerError(f"the line is over {max_bytes:,} bytes; a line is at most that")
            continue
        try:
            yield number, decode(raw.removesuffix(b"\n").removesuffix(b"\r"), "the line")
        except ExplorerError as exc:
            yield number, exc
