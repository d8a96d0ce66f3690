"""The round as a linear MIP: one solver-neutral description, its solvers, its LP bound and its export.

- :mod:`optsched.mip.data`: per-job preprocessing shared by every linear formulation;
- :mod:`optsched.mip.linear`: the solver-neutral :class:`~optsched.mip.linear.LinearModel`;
- :mod:`optsched.mip.description`: the exact MIP, one builder per constraint family;
- :mod:`optsched.mip.backends`: translations to MPSolver, PuLP, cvxpy and MPS/LP text;
- :mod:`optsched.mip.solvers`: ``scip``, ``cbc`` and ``pulp`` solve methods;
- :mod:`optsched.mip.bound`: :func:`~optsched.mip.bound.lp_bound`, fast LP upper bounds.

The math is in ``formulations/mip.md``.
"""
