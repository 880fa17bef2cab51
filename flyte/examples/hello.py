"""The smallest workflow propeller runs here: two plain python tasks, one feeding the other.

make flyte-run FILE=flyte/examples/hello.py WORKFLOW=wf INPUTS='{"n": 5}'   # prints {"o0": 113}
"""

from flytekit import task, workflow


@task
def square(n: int) -> int:
    return n * n


@task
def plus(a: int, b: int) -> int:
    return a + b


@workflow
def wf(n: int = 5) -> int:
    return plus(a=square(n=n), b=88)
