"""Statistics on plain arrays and DataFrames (no ORM), shared by annotation and scoring.

The package itself imports nothing heavy, so the defaults below can be read without numpy,
pandas or scipy (the release forms and pages do).
"""

LEVEL = 0.95  # confidence level of the intervals
N_BOOT = 1000  # bootstrap draws
