"""Schemathesis hooks of the contract suite (api/tests/it/contract.rs).

The upload's `file` part is declared, through the multipart `encoding`, as one of the
media types Quire accepts (PDF, PNG, JPEG, TIFF, WebP, plain text): the server decides
the type from the bytes, so a valid file is one whose bytes are of such a type. These
strategies are Schemathesis's documented way to say what such a file looks like
(`schemathesis.openapi.media_type`); every file still varies, so uploads are not all
duplicates of each other, and one that starts like a PDF but is none makes a job fail
(which gives the retry link something to retry).
"""

import struct
import uuid
import zlib

import schemathesis
from hypothesis import strategies as st


def _png(width: int, height: int, shade: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = b"".join(b"\x00" + bytes([shade]) * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


_TIFF = (
    b"II*\x00\x08\x00\x00\x00"  # little-endian header, first IFD at 8
    + b"\x04\x00"  # 4 entries: width, height, bits per sample, strip offset
    + b"\x00\x01\x03\x00\x01\x00\x00\x00\x01\x00\x00\x00"
    + b"\x01\x01\x03\x00\x01\x00\x00\x00\x01\x00\x00\x00"
    + b"\x02\x01\x03\x00\x01\x00\x00\x00\x08\x00\x00\x00"
    + b"\x11\x01\x04\x00\x01\x00\x00\x00\x3e\x00\x00\x00"
    + b"\x00\x00\x00\x00"
    + b"\xff"
)

_JPEG_HEAD = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
_WEBP = b"RIFF\x1a\x00\x00\x00WEBPVP8L\x0e\x00\x00\x00\x2f\x00\x00\x00\x00\x07\x10\x11\xfd\x0f\x44\x44\xff\x03"

_tail = st.binary(min_size=1, max_size=64)

# Letters, digits, punctuation and spaces: text the sniffer takes as plain text (no
# control characters, and never markup, which starts with "<").
_words = st.text(
    alphabet=st.characters(
        codec="utf-8",
        categories=("L", "N", "P", "Zs"),
        exclude_characters="<",
    ),
    min_size=1,
    max_size=200,
).filter(lambda text: text.strip())

schemathesis.openapi.media_type(
    "text/plain", _words.map(lambda text: ("Quire contract " + text + "\n").encode())
)
schemathesis.openapi.media_type(
    "image/png",
    st.builds(_png, st.integers(1, 8), st.integers(1, 8), st.integers(0, 255)),
)
schemathesis.openapi.media_type(
    "application/pdf", _tail.map(lambda tail: b"%PDF-1.4\n%" + tail.hex().encode() + b"\n%%EOF\n")
)
schemathesis.openapi.media_type("image/tiff", _tail.map(lambda tail: _TIFF + tail))
schemathesis.openapi.media_type("image/jpeg", _tail.map(lambda tail: _JPEG_HEAD + tail))
schemathesis.openapi.media_type("image/webp", _tail.map(lambda tail: _WEBP + tail))


# An Idempotency-Key names one request: the same key again is a replay of the first
# answer (or, with another request, 422 idempotency_key_reused). A conforming client
# sends a fresh key with each new request, and so does this run: a key a valid request
# would share with an earlier one is replaced by a fresh one (the same 1 to 255 visible
# ASCII characters). Hypothesis draws the same small strings again and again, which
# would otherwise make valid requests collide; replays are the idempotency tests' work.
_keys_sent: set[str] = set()


@schemathesis.hook
def before_call(context, case, kwargs):
    headers = case.headers
    if not headers or "Idempotency-Key" not in headers:
        return
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return
    key = headers["Idempotency-Key"]
    if key in _keys_sent:
        key = uuid.uuid4().hex
        headers["Idempotency-Key"] = key
    _keys_sent.add(key)
