"""The ground floor: the helpers every part of synapto may use, each importing nothing of
synapto outside this package (errors, logs, seeds, noise keys, running moments, BLAS threads,
output folders, fault points, config files and option values, run-time estimates)."""
