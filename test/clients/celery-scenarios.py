"""
Celery (Debian's python3-celery 5 with kombu's Redis transport, default settings, no
global_keyprefix) through respool, as broker and result backend: its scenarios end to end, each
printed as one JSON line {"scenario": ..., ...} that the test checks.

    /usr/bin/python3 test/clients/celery-scenarios.py HOST PORT

  jobs       200 tasks sent, one worker runs them: every result as expected
  failed     a task that raises: its state is FAILURE and get() raises its exception
  scheduled  tasks with a countdown and a past ETA: the worker holds them, then runs them
  dependent  a chain (add | mul) and a chord (a group, then a callback over its results)

The worker is a child process (solo pool) this script starts and ends by its PID.
"""
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

here = os.path.dirname(os.path.abspath(__file__))
jobs = os.path.join(here, 'jobs')
sys.path.insert(0, jobs)
host, port = sys.argv[1], int(sys.argv[2])
os.environ['CELERY_URL'] = f'redis://{host}:{port}/0'

from celery import chain, chord, group  # noqa: E402

from celery_tasks import add, fail, mul, total  # noqa: E402


def emit(**fields):
    print(json.dumps(fields), flush=True)


def scenario(name, run):
    try:
        run()
    except Exception as e:  # the test sees which scenario broke and how
        emit(scenario=name, error=f'{type(e).__name__}: {e}'[:300])


def jobs_scenario():
    results = [add.delay(i, i) for i in range(200)]
    ok = sum(1 for i, r in enumerate(results) if r.get(timeout=60) == 2 * i)
    emit(scenario='jobs', ok=ok)


def failed_scenario():
    r = fail.delay()
    raised = False
    try:
        r.get(timeout=30)
    except ValueError:
        raised = True
    emit(scenario='failed', state=r.state, raised=raised)


def scheduled_scenario():
    later = add.apply_async((1, 2), countdown=1)
    past = add.apply_async((3, 4), eta=datetime.now(timezone.utc) - timedelta(seconds=5))
    emit(scenario='scheduled', values=[later.get(timeout=30), past.get(timeout=30)])


def dependent_scenario():
    chained = chain(add.s(2, 2), mul.s(5))()
    chorded = chord(group(add.s(i, i) for i in range(5)), total.s())()
    emit(scenario='dependent', chain=chained.get(timeout=30), chord=chorded.get(timeout=30))


worker = subprocess.Popen(
    [sys.executable, '-m', 'celery', '-A', 'celery_tasks', 'worker', '--pool=solo', '--concurrency=1', '--loglevel=WARNING',
     '--without-gossip', '--without-mingle', '--without-heartbeat'],
    cwd=jobs, env=dict(os.environ), stdout=sys.stderr, stderr=sys.stderr)
try:
    scenario('jobs', jobs_scenario)
    scenario('failed', failed_scenario)
    scenario('scheduled', scheduled_scenario)
    scenario('dependent', dependent_scenario)
finally:
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout=20)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
