"""
RQ (Debian's python3-rq) through respool, with RQ's default settings: its scenarios end to end,
each printed as one JSON line {"scenario": ..., ...} that the test checks.

    /usr/bin/python3 test/clients/rq-scenarios.py HOST PORT QUEUE

  jobs       200 jobs enqueued, a burst worker runs them all: every result as expected
  failed     a job that raises lands in the failed-job registry with its exception
  scheduled  jobs enqueued in 1 s and at a past time: the worker's scheduler moves them, they run
  dependent  a job that depends on another runs after it, with the first's result stored
"""
import json
import os
import sys
import time
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'jobs'))

from redis import Redis  # noqa: E402
from rq import Queue, SimpleWorker  # noqa: E402
from rq.job import Job  # noqa: E402
from rq.registry import FailedJobRegistry, FinishedJobRegistry  # noqa: E402

import rq_tasks  # noqa: E402

host, port, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
conn = Redis(host=host, port=port, socket_timeout=30)
queue = Queue(name, connection=conn)


def work(with_scheduler=False):
    worker = SimpleWorker([queue], connection=conn)
    worker.work(burst=True, with_scheduler=with_scheduler)


def emit(**fields):
    print(json.dumps(fields), flush=True)


def jobs():
    enqueued = [queue.enqueue(rq_tasks.add, i, 1) for i in range(200)]
    work()
    results = [Job.fetch(j.id, connection=conn).result for j in enqueued]
    finished = FinishedJobRegistry(queue=queue)
    emit(scenario='jobs', ok=sum(1 for i, r in enumerate(results) if r == i + 1), finished=len(finished), left=len(queue))


def failed():
    job = queue.enqueue(rq_tasks.fail, 'boom')
    work()
    registry = FailedJobRegistry(queue=queue)
    fetched = Job.fetch(job.id, connection=conn)
    emit(scenario='failed', in_registry=job.id in registry.get_job_ids(), status=fetched.get_status(), raised='ValueError: boom' in (fetched.exc_info or ''))


def scheduled():
    soon = queue.enqueue_in(timedelta(seconds=1), rq_tasks.record, f'{name}:scheduled', 'in')
    past = queue.enqueue_at(datetime.now(timezone.utc) - timedelta(seconds=5), rq_tasks.record, f'{name}:scheduled', 'at')
    deadline = time.time() + 20
    while time.time() < deadline:
        work(with_scheduler=True)
        if Job.fetch(soon.id, connection=conn).get_status() == 'finished' and Job.fetch(past.id, connection=conn).get_status() == 'finished':
            break
        time.sleep(0.5)
    values = sorted(v.decode() for v in conn.lrange(f'{name}:scheduled', 0, -1))
    emit(scenario='scheduled', statuses=[Job.fetch(j.id, connection=conn).get_status() for j in (soon, past)], values=values)


def dependent():
    first = queue.enqueue(rq_tasks.add, 20, 1)
    second = queue.enqueue(rq_tasks.add, 1, 1, depends_on=first)
    deferred = second.get_status()
    work()
    emit(scenario='dependent', deferred=deferred, results=[Job.fetch(j.id, connection=conn).result for j in (first, second)])


for scenario in (jobs, failed, scheduled, dependent):
    try:
        scenario()
    except Exception as exc:  # one scenario's failure is reported, the next ones still run
        emit(scenario=scenario.__name__, error=f'{type(exc).__name__}: {exc}')
