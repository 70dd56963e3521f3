"""What is kept on disk: history, presets, baselines, the plan cache, and the file helpers they share."""
