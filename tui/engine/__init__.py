"""GPU work, run in the engine process: graphs, inputs, references, timing, peers, explanations."""
