"""The client that gets killed: begins an upload of a deterministic content and sends it chunk
after chunk, printing its id and each confirmed offset, and never commits (the test SIGKILLs it
mid-transfer). Run: upload_child.py PORT KEY_FILE PATH SEED SIZE CHUNK"""

import random
import sys

from fileskit import Files, sha256, wire


def content(seed, size):
    return random.Random(seed).randbytes(size)


def main():
    port, key_file, path, seed, size, chunk = sys.argv[1:7]
    data = content(int(seed), int(size))
    fs = Files(int(port), wire.load_key_file(key_file))
    b = fs.begin(path, len(data), sha256(data), mode=0o600)
    print("ID", b.upload_id, flush=True)
    offset, chunk = 0, int(chunk)
    while offset < len(data):
        offset = fs.chunk(b.upload_id, offset, data[offset:offset + chunk])
        print("CONFIRMED", offset, flush=True)
    print("ALL SENT", flush=True)
    sys.stdin.read()  # wait to be killed


if __name__ == "__main__":
    main()
