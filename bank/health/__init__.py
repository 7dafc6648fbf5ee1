"""Item and bank health: statistics of the question bank computed from the verdicts of many
models on its items (Benchmark², Qian et al.; Benchmark Health Index, Zhu et al.;
Capability Alignment).

Everything here is pure numpy/scipy over a sparse response matrix, free of I/O:

* ``responses``: the sparse matrix (observed cells only), models with family, size and date;
* ``results``: the result objects every other module returns;
* ``items``: per-item statistics (p, discrimination, CAS, K-fold CAS, inversions, CAD, ...);
* ``aggregates``: per-stratum and per-bank statistics (DS, EDR, RCV, S_Sta, S_Dyn, BHI, ...);
* ``stability``: bootstrap rank stability, resampling item families;
* ``population``: which models a result is computed on;
* ``flags``: review rules with thresholds; ``subsets``: selective subsets;
* ``report``: one report with its population and choices (the JSON of ``proctor bank health``).
"""
