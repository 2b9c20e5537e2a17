"""Job functions for test/clients/rq-scenarios.py (RQ imports them by name in the worker)."""


def add(a, b):
    return a + b


def fail(message):
    raise ValueError(message)


def record(key, value):
    # A job that writes through RQ's own connection: its key is seen again by the test.
    from rq import get_current_job
    job = get_current_job()
    job.connection.rpush(key, value)
    return value
