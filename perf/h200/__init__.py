"""Scripts that run on the H200 (one device call each), with their notes."""
