"""Records and declarations: the configuration, its fields and rules, run options, results.

The bottom layer: no torch, cudnn, click or textual here, so every other layer can import it.
"""
