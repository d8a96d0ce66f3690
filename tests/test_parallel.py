"""optsched.parallel: the execution backends, below every caller that maps work over processes."""

from __future__ import annotations

import operator
import subprocess
import sys

import pytest

from optsched.errors import InputError
from optsched.parallel import LocalPool, Serial, get_backend


def test_the_callers_of_parallel_do_not_load_bench():
    """Label generation and simulation grids use the backends without importing optsched.bench."""
    code = ("import sys, optsched.learned.labels, optsched.sim.experiment\n"
            "bench = sorted(m for m in sys.modules if m.startswith('optsched.bench'))\n"
            "assert not bench, bench\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_get_backend_by_name():
    assert isinstance(get_backend("local", workers=1), Serial)
    assert isinstance(get_backend("serial"), Serial)
    pool = get_backend("local", workers=2)
    assert isinstance(pool, LocalPool) and pool.workers == 2
    assert sorted(pool.imap_unordered(operator.neg, range(5))) == [-4, -3, -2, -1, 0]
    with pytest.raises(InputError, match="unknown backend"):
        get_backend("threads")


def _backend_in_a_daemon(q) -> None:
    q.put(type(get_backend("local", workers=2)).__name__)


def test_local_runs_serially_inside_a_daemonic_process():
    """A worker of a process pool (the HTTP service's) may not start one: ``local`` runs serially there."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_backend_in_a_daemon, args=(q,), daemon=True)
    p.start()
    p.join(60)
    assert q.get(timeout=5) == "Serial"
