#!/usr/bin/env python3
"""Stream a command's output as it is written, both streams, then say how it ended.

    BOXKITE_URL=tcp://127.0.0.1:7700 BOXKITE_KEY_FILE=key python3 stream_output.py
"""

import boxkite

BUILD = "for step in configure compile link; do echo \"$step...\"; sleep 0.2; done; echo 'warning: 1' >&2; exit 2"


def main() -> None:
    with boxkite.Client.from_env() as box:
        with box.stream(BUILD) as out:
            for chunk in out:
                for line in chunk.text.splitlines():
                    print("[%s] %s" % (chunk.stream, line))
        assert out.status is not None
        print("the build %s" % out.status.describe())


if __name__ == "__main__":
    main()
