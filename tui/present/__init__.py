"""What the CLI prints and the panes show: units, words, reports and exports, shared by both."""
