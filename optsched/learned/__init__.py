"""The learned side of optsched.

A MAIFS-style attention policy over jobs and nodes: its features
(:mod:`~optsched.learned.features`), the network as a torch module for training
(:mod:`~optsched.learned.policy`) and the same forward pass in numpy for inference
(:mod:`~optsched.learned.inference`, with the shipped weights as package data in ``weights/``),
coordinated decoding and Evaluate mode (:mod:`~optsched.learned.decode`), the ``maifs`` solver
(:mod:`~optsched.learned.solver`), distillation from exact solutions (:mod:`~optsched.learned.labels`,
:mod:`~optsched.learned.train`) and CP-SAT warm starts (:mod:`~optsched.learned.warmstart`).
Solving needs no torch; only ``policy`` and ``train`` import it (the ``train`` extra).
Submodules are imported on demand.
"""
