"""The headless command line: one click group (main.py) and a module per command family."""
