"""The dashboard's screens, one a file: main.py (the dashboard's own), and the dialogs and help,
each imported where it is first opened (help brings a Markdown parser: not on the start's path)."""
