"""A task that fails: `make flyte-run` exits 1 and prints the error and its node.

    make flyte-run FILE=flyte/examples/fail.py WORKFLOW=wf INPUTS='{"n": -1}'   # one attempt
    make flyte-run FILE=flyte/examples/fail.py WORKFLOW=wf INPUTS='{"n": 0}'    # two: retries=1

flytekit marks an exception from user code non-recoverable (propeller does not retry it, whatever
`retries` says) unless it is a FlyteRecoverableException.
"""

from flytekit import task, workflow
from flytekit.exceptions.user import FlyteRecoverableException


@task(retries=1)
def check(n: int) -> int:
    if n < 0:
        raise ValueError(f"n must not be negative, got {n}")
    if n == 0:
        raise FlyteRecoverableException("n is 0: worth another attempt")
    return n


@workflow
def wf(n: int = 1) -> int:
    return check(n=n)
