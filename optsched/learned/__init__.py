"""The learned side of optsched (the only package that imports torch).

A MAIFS-style attention policy over jobs and nodes (:mod:`~optsched.learned.policy`), its
features (:mod:`~optsched.learned.features`), coordinated decoding and Evaluate mode
(:mod:`~optsched.learned.decode`), the ``maifs`` solver (:mod:`~optsched.learned.solver`),
distillation from exact solutions (:mod:`~optsched.learned.labels`,
:mod:`~optsched.learned.train`) and CP-SAT warm starts (:mod:`~optsched.learned.warmstart`).
Submodules are imported on demand; importing this package does not load torch.
"""
