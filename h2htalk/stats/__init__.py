"""Statistics on plain arrays and DataFrames (no ORM), shared by annotation and scoring."""
