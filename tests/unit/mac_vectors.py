#!/usr/bin/python3
"""Recompute the Envelope MAC test vectors with nothing but Python's standard library, from the
byte-by-byte description in docs/PROTOCOL.md ("The MAC"), and check that the document and the C
unit test (tests/unit/test_mac_vectors.c) carry exactly these inputs and MACs. The whole sealed
Envelopes of the second and fifth vectors, encoded here by hand from the protobuf rules, must be in
both as well.

So three things must agree: the document, common/envelope.c (through the C test) and this
independent implementation. Run from the top of the tree: python3 tests/unit/mac_vectors.py
"""

import hashlib
import hmac
import re
import struct
import sys

DOMAIN = b"boxkite.v1.Envelope\x00"


def mac_input(f):
    """The MAC input of docs/PROTOCOL.md: fixed-width big-endian integers, u32-length-prefixed
    strings and nonce, u64-length-prefixed body, and the data as its u64 length and SHA-256."""

    def lp32(b):
        return struct.pack(">I", len(b)) + b

    return (
        DOMAIN
        + struct.pack(">II", f["version"], f["kind"])
        + lp32(f["key_id"].encode())
        + struct.pack(">q", f["timestamp_ms"])
        + lp32(f["nonce"])
        + lp32(f["method"].encode())
        + struct.pack(">iI", f["status"], f["detail"])
        + lp32(f["message"].encode())
        + struct.pack(">Q", len(f["body"]))
        + f["body"]
        + struct.pack(">Q", len(f.get("data", b"")))
        + hashlib.sha256(f.get("data", b"")).digest()
    )


def varint(v):
    v &= (1 << 64) - 1  # int64 and int32 values are sent as 64-bit two's complement
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def envelope_wire(f, mac):
    """The Envelope as proto3 encodes it: fields in number order, default values left out."""

    def number(n, v):
        return varint(n << 3) + varint(v) if v else b""

    def length_delimited(n, b):
        return varint(n << 3 | 2) + varint(len(b)) + b if b else b""

    return (
        number(1, f["version"]) + number(2, f["kind"]) + length_delimited(3, f["key_id"].encode())
        + number(4, f["timestamp_ms"]) + length_delimited(5, f["nonce"])
        + length_delimited(6, f["method"].encode()) + number(7, f["status"]) + number(8, f["detail"])
        + length_delimited(9, f["message"].encode()) + length_delimited(10, f["body"])
        + length_delimited(11, mac) + length_delimited(12, f.get("data", b""))
    )


KEY_32 = bytes(range(0x00, 0x20))
KEY_64 = bytes(range(0x40, 0x80))
NONCE_A = bytes(range(0xA0, 0xB0))
HEALTH_RESPONSE = bytes.fromhex("0a05302e312e30 12056c6f63616c 1801 2001 28d209")

UPLOAD_ID = b"00112233445566778899aabbccddeeff"
# FileUploadChunkRequest{upload_id: UPLOAD_ID, offset: 0}: field 1, 32 bytes.
CHUNK_REQUEST = b"\x0a\x20" + UPLOAD_ID
CHUNK_DATA = b"hello, world\n"

VECTORS = [
    (
        "request",
        KEY_32,
        dict(version=2, kind=1, key_id="test-key", timestamp_ms=1700000000000, nonce=NONCE_A,
             method="Exec", status=0, detail=0, message="",
             body=bytes.fromhex("0a046563686f0a026869")),
        "9da43df1278db7d4fb2bd8b62476c6f1aabf2e3b216687ab46b65390fa54d603",
    ),
    (
        "request with an empty body",
        KEY_32,
        dict(version=2, kind=1, key_id="test-key", timestamp_ms=1700000000500,
             nonce=bytes.fromhex("00112233445566778899aabbccddeeff"), method="Health", status=0,
             detail=0, message="", body=b""),
        "4875627d69f547a3dc53c7b9a22cdcb9982555508ce286fcc97f1e9190d0d16f",
    ),
    (
        "refusal response",
        KEY_32,
        dict(version=2, kind=2, key_id="test-key", timestamp_ms=1700000001234, nonce=NONCE_A,
             method="Exec", status=16, detail=5,
             message="timestamp 45000 ms is older than the 30000 ms window", body=b""),
        "f8268bdfbaa68a2c289f2e4e4d6954917f7c0c69088f0c2edd6fbbab748126d4",
    ),
    (
        "success response, 64-byte key",
        KEY_64,
        dict(version=2, kind=2, key_id="ops.rotated_2", timestamp_ms=1700000002000, nonce=NONCE_A,
             method="Health", status=0, detail=0, message="", body=HEALTH_RESPONSE),
        "ab3362946eb5422a6b039850534e850951241d87bc176ec82bffd44507c29e7c",
    ),
    (
        "request with data",
        KEY_32,
        dict(version=2, kind=1, key_id="test-key", timestamp_ms=1700000003000, nonce=NONCE_A,
             method="FileUploadChunk", status=0, detail=0, message="", body=CHUNK_REQUEST,
             data=CHUNK_DATA),
        "43cdd20c44f8fb06ac3c51a21fc3cf736008bf89f185df24016258f1685fe139",
    ),
]


# The vectors whose whole sealed Envelope the document and the C test spell out.
WIRE_EXAMPLES = ("request with an empty body", "request with data")

# docs/PROTOCOL.md's content hash vectors ("Content hash"): SHA-256 over the SHA-256 of each
# 4 MiB block. Also in tests/unit/test_contenthash.c.
BLOCK = 4 << 20
CONTENT_VECTORS = [
    ("empty", b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ("one block", b"hello, world\n", "74743aec8fc3daf7bffe600cdf6848cdd1105671c273733f544caba63dfcba92"),
    ("two blocks", bytes(BLOCK) + b"abc", "3fa6db8310a97daafad66b46d1d89070c4fe821f88b40cb9a06fa9aca84e30ce"),
]


def content_hash(data):
    blocks = [hashlib.sha256(data[i:i + BLOCK]).digest() for i in range(0, len(data), BLOCK)]
    return blocks, hashlib.sha256(b"".join(blocks)).hexdigest()


def squeeze(text):
    return re.sub(r"\s+", "", text).lower()


def main():
    doc = squeeze(open("docs/PROTOCOL.md", encoding="utf-8").read())
    ctest = open("tests/unit/test_mac_vectors.c", encoding="utf-8").read().lower()
    ctest_content = open("tests/unit/test_contenthash.c", encoding="utf-8").read().lower()
    failures = 0
    for name, key, fields, want in VECTORS:
        data = mac_input(fields)
        got = hmac.new(key, data, hashlib.sha256).hexdigest()
        problems = []
        if got != want:
            problems.append(f"computed {got}, expected {want}")
        if data.hex() not in doc:
            problems.append("its MAC input bytes are not spelled out in docs/PROTOCOL.md")
        if want not in doc:
            problems.append("its MAC is not in docs/PROTOCOL.md")
        if want not in ctest:
            problems.append("its MAC is not in tests/unit/test_mac_vectors.c")
        if name in WIRE_EXAMPLES:
            wire = envelope_wire(fields, bytes.fromhex(want)).hex()
            if wire not in doc:
                problems.append(f"its sealed Envelope {wire} is not in docs/PROTOCOL.md")
            if wire not in re.sub(r'[\s"]+', "", ctest):  # C string literals may be split
                problems.append(f"its sealed Envelope {wire} is not in tests/unit/test_mac_vectors.c")
        for p in problems:
            print(f"mac_vectors: {name}: {p}", file=sys.stderr)
        failures += 1 if problems else 0
    for name, data, want in CONTENT_VECTORS:
        blocks, got = content_hash(data)
        problems = []
        if got != want:
            problems.append(f"computed {got}, expected {want}")
        if want not in doc or want not in ctest_content:
            problems.append("its content hash is not in docs/PROTOCOL.md and tests/unit/test_contenthash.c")
        problems += [f"its block hash {b.hex()} is not in docs/PROTOCOL.md" for b in blocks if b.hex() not in doc]
        for p in problems:
            print(f"mac_vectors: content hash of {name}: {p}", file=sys.stderr)
        failures += 1 if problems else 0
    total = len(VECTORS) + len(CONTENT_VECTORS)
    print(f"mac_vectors: {total - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
