#!/usr/bin/env python3
"""Checks that a file is structurally valid Chrome Trace Event JSON as rpma-sim writes it.

Usage: check_chrome_trace.py FILE [MIN_SLICES]
Checks: a JSON object with a traceEvents array; every event has the keys its phase needs
(M: name, pid, args; X: name, ts, dur, pid, tid; i: name, ts, s, pid, tid); ts and dur are
numbers, dur >= 0; on every track (pid, tid) ts never decreases in file order and the complete
slices nest (none overlaps another partially); every track has a thread_name; at least
MIN_SLICES complete slices (default 1). Prints what it found, exits 1 on the first problem.
"""

import json
import sys

REQUIRED = {
    "M": ("name", "pid", "args"),
    "X": ("name", "ts", "dur", "pid", "tid"),
    "i": ("name", "ts", "s", "pid", "tid"),
}


def fail(message):
    print(f"INVALID: {message}")
    sys.exit(1)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    min_slices = int(sys.argv[2]) if len(sys.argv) == 3 else 1
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("no traceEvents array")
    named_tracks = set()
    last_ts = {}
    open_ends = {}  # per track: ends of the slices that contain the current ts
    slices = instants = 0
    for n, event in enumerate(doc["traceEvents"]):
        ph = event.get("ph")
        if ph not in REQUIRED:
            fail(f"event {n}: phase {ph!r} is not one of {sorted(REQUIRED)}")
        for key in REQUIRED[ph]:
            if key not in event:
                fail(f"event {n} ({ph}): no {key!r}: {event}")
        if ph == "M":
            if event["name"] == "thread_name":
                named_tracks.add((event["pid"], event["tid"]))
            continue
        ts = event["ts"]
        if not isinstance(ts, (int, float)) or ts < 0:
            fail(f"event {n}: bad ts {ts!r}")
        track = (event["pid"], event["tid"])
        if track not in named_tracks:
            fail(f"event {n}: track {track} has no thread_name")
        if ts < last_ts.get(track, 0):
            fail(f"event {n}: ts {ts} < {last_ts[track]} earlier on track {track}")
        last_ts[track] = ts
        if ph == "X":
            dur = event["dur"]
            if not isinstance(dur, (int, float)) or dur < 0:
                fail(f"event {n}: bad dur {dur!r}")
            stack = open_ends.setdefault(track, [])
            while stack and stack[-1] <= ts + 1e-9:  # (ts + dur is a float sum)
                stack.pop()
            end = ts + dur
            if stack and end > stack[-1] + 1e-9:
                fail(f"event {n}: slice [{ts}, {end}] overlaps one ending at {stack[-1]} "
                     f"partially on track {track}")
            stack.append(end)
            slices += 1
        else:
            if event["s"] not in ("t", "p", "g"):
                fail(f"event {n}: bad instant scope {event['s']!r}")
            instants += 1
    if slices < min_slices:
        fail(f"{slices} complete slices, expected at least {min_slices}")
    print(f"valid: {len(named_tracks)} tracks, {slices} slices, {instants} instants")


if __name__ == "__main__":
    main()
