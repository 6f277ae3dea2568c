"""Studies built on the diagnostics: symmetry chains, the explorer's invariance matrix, the
invariance experiment, the width sweep, cutoff sensitivity, statistics and the data-parallel run."""
