"""redis-py running verified commands through respool until stdin closes (takeover.test.ts).

usage: redis-py-loop.py PORT PREFIX
SET PREFIX:i, GET it back (checked), INCR PREFIX:counter, in a loop, with redis-py's default
client (its connection pool, no retry configured). Prints one JSON line at the end: the
writes acknowledged (key -> value), INCRs acknowledged, and each failed command's error.
"""
import json
import sys
import threading

import redis

port, prefix = int(sys.argv[1]), sys.argv[2]
client = redis.Redis(host="127.0.0.1", port=port)
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
written, failures, increments, i = {}, [], 0, 0
while not stop.is_set():
    key, value = f"{prefix}:{i}", f"py-{i}"
    i += 1
    try:
        assert client.set(key, value) is True
        written[key] = value
        got = client.get(key)
        if got != value.encode():
            failures.append(f"{key}: GET gave {got!r}")
        client.incr(f"{prefix}:counter")
        increments += 1
    except Exception as err:  # noqa: BLE001 - every failure is reported
        failures.append(f"{key}: {type(err).__name__}: {err}")
print(json.dumps({"written": written, "increments": increments, "failures": failures[:20], "failed": len(failures)}))
