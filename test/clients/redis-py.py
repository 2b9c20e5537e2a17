"""
redis-py (Debian python3-redis) driving one server at HOST:PORT, as an application written for
one server does. Prints one JSON object with what the client returned; the vitest test
(test/integration/other-clients.test.ts) decides what is right.

    /usr/bin/python3 test/clients/redis-py.py HOST PORT PREFIX
"""
import hashlib
import json
import sys
import threading
import time

import redis

host, port, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def k(name):
    return f"{prefix}:{name}"


def connect(**options):
    # Every wait is bounded: a reply that never comes fails the script instead of hanging it.
    return redis.Redis(host=host, port=port, socket_timeout=5, socket_connect_timeout=5, **options)


def after(delay, action):
    """Runs action on its own thread after delay seconds (another connection's write)."""
    thread = threading.Thread(target=lambda: (time.sleep(delay), action()), daemon=True)
    thread.start()
    return thread


def main():
    r = connect(decode_responses=True, client_name=f"{prefix}-app")
    raw = connect()  # bytes in, bytes out
    other = connect(decode_responses=True)
    out = {"client": f"redis-py {redis.__version__}"}

    out["ping"] = r.ping()
    out["client_getname"] = r.client_getname()
    info = r.client_info()  # redis-py parses CLIENT INFO's fields, the integers among them
    out["client_info"] = {"name": info["name"], "db": info["db"], "multi": info["multi"]}

    out["set"] = r.set(k("str"), "hello")
    out["get"] = r.get(k("str"))
    out["get_missing"] = r.get(k("missing"))
    binary = b"a\r\nb\x00c\r\n"
    out["set_binary"] = raw.set(k("bin"), binary)
    out["get_binary_hex"] = raw.get(k("bin")).hex()
    big = bytes(i % 256 for i in range(100 * 1024))
    out["set_big"] = raw.set(k("big"), big)
    got = raw.get(k("big"))
    out["get_big"] = {"length": len(got), "sha256": hashlib.sha256(got).hexdigest()}
    out["incr"] = [r.incr(k("counter")), r.incr(k("counter"))]

    multi_keys = [k(f"m{i}") for i in range(1, 7)]
    out["mset"] = r.mset({key: f"v{i}" for i, key in enumerate(multi_keys, 1)})
    out["mget"] = r.mget(multi_keys + [k("missing")])
    out["del"] = r.delete(*multi_keys, k("missing"))
    out["mget_after_del"] = r.mget(multi_keys)

    out["expire"] = r.expire(k("str"), 1000)
    out["ttl"] = r.ttl(k("str"))

    out["hset"] = r.hset(k("hash"), mapping={"f1": "v1", "f2": "v2", "f3": "v3"})
    out["hgetall"] = r.hgetall(k("hash"))
    out["rpush"] = r.rpush(k("list"), "a", "b", "c")
    out["lrange"] = r.lrange(k("list"), 0, -1)
    out["sadd"] = r.sadd(k("set"), "x", "y", "z")
    out["smembers"] = sorted(r.smembers(k("set")))
    out["zadd"] = r.zadd(k("zset"), {"a": 1, "b": 2.5, "c": 3})
    out["zrange_withscores"] = r.zrange(k("zset"), 0, -1, withscores=True)

    pipe = r.pipeline(transaction=False)
    for i in range(50):
        if i % 2 == 0:
            pipe.set(k(f"pipe:{i}"), f"v{i}")
        else:
            pipe.get(k(f"pipe:{i - 1}"))
    out["pipeline"] = pipe.execute()

    tx = r.pipeline(transaction=True)
    tx.set(k("tx:a"), "1").incr(k("tx:b")).rpush(k("tx:c"), "x").get(k("tx:a"))
    out["multi_exec"] = tx.execute()

    r.set(k("watched"), "0")
    with r.pipeline(transaction=True) as watching:
        watching.watch(k("watched"))
        other.set(k("watched"), "changed")  # another connection changes it between WATCH and EXEC
        watching.multi()
        watching.set(k("watched"), "mine")
        try:
            out["watch_exec"] = watching.execute()
        except redis.WatchError as e:
            out["watch_exec"] = {"error": type(e).__name__, "message": str(e)}
    out["watched_after"] = r.get(k("watched"))

    r.set(k("notnum"), "abc")
    try:
        out["incr_error"] = r.incr(k("notnum"))
    except redis.ResponseError as e:
        out["incr_error"] = {"error": type(e).__name__, "message": str(e)}
    out["ping_after_error"] = r.ping()

    script = "redis.call('SET', KEYS[1], ARGV[1]); return {KEYS[1], redis.call('GET', KEYS[1]), redis.call('STRLEN', KEYS[1])}"
    out["eval"] = r.eval(script, 1, k("lua"), "from-lua")

    for i in range(20):
        r.set(k(f"scan:{i}"), str(i))
    out["scan"] = sorted(r.scan_iter(match=k("scan:*"), count=5))

    channel = k("chan")
    pubsub = r.pubsub()
    pubsub.subscribe(channel)
    out["subscribe"] = pubsub.get_message(timeout=5)
    out["publish"] = other.publish(channel, "hello\r\nworld")
    message = None
    deadline = time.monotonic() + 5
    while message is None and time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.5)
    out["message"] = message
    pubsub.close()

    pusher = after(0.3, lambda: other.rpush(k("queue"), "job-1"))
    out["blpop"] = r.blpop([k("queue")], timeout=3)  # under socket_timeout: a miss shows as null
    pusher.join(5)

    print(json.dumps(out))


try:
    main()
except Exception as e:  # noqa: BLE001 - any failure: say what and exit non-zero
    print(f"redis-py scenario failed: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
