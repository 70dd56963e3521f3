"""Long jobs built on runs: sweeps, the preset check and the fleet check."""
