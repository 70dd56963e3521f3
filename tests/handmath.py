"""Attention for one head in plain Python loops: the arithmetic the references are checked against."""

import math

import torch


def hand_attention(q, k, v, scale, keep, add=lambda i, j: 0.0):
    """softmax over kept keys of (q_i . k_j * scale + add(i, j)), weighted sum of v; a row
    with no kept key is 0. q, k, v are lists of rows."""
    out = []
    for i in range(len(q)):
        s = [
            sum(a * b for a, b in zip(q[i], k[j], strict=True)) * scale + add(i, j) if keep(i, j) else None
            for j in range(len(k))
        ]
        kept = [x for x in s if x is not None]
        if not kept:
            out.append([0.0] * len(v[0]))
            continue
        m = max(kept)
        w = [math.exp(x - m) if x is not None else 0.0 for x in s]
        out.append([sum(w[j] * v[j][c] for j in range(len(v))) / sum(w) for c in range(len(v[0]))])
    return torch.tensor(out)
