"""The engine process: its client, its child side, the launcher and the engine server."""
