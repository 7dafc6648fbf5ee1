"""Adaptive sessions (ReLE §3.3).

Pure logic, no I/O: Neyman allocation (:mod:`.allocation`), the stratified estimator
(:mod:`.estimator`), confidence half-widths for sampling without replacement and the
sequential stopping rule (:mod:`.bounds`), item parameters from the bank's history
(:mod:`.irt`) and the policy that ties them together (:mod:`.policy`). The replay
simulator (:mod:`.replay`) runs the same policy on recorded responses.
"""
