"""Celery tasks for test/clients/celery-scenarios.py: broker and result backend are respool (CELERY_URL)."""
import os

from celery import Celery

url = os.environ['CELERY_URL']
app = Celery('celery_tasks', broker=url, backend=url)
# Default settings but for the ones a bounded test run needs: no gossip or mingle chatter.
app.conf.worker_hijack_root_logger = False


@app.task
def add(x, y):
    return x + y


@app.task
def mul(x, y):
    return x * y


@app.task
def fail():
    raise ValueError('boom')


@app.task
def total(values):
    return sum(values)
