"""A pass cuDNN declines, measured without it: cuDNN's refusal stays the pass's (its status, its
words, the phase that refused), and on the tensors the graph would have read the fp32 reference,
the torch peer and the peers asked for run as they do beside a built graph. So a variant cuDNN
refuses (or is known to refuse: its graph is then not built at all) still shows against Flex and
FA4, in the Peers pane and the fastest way.

A backward whose forward cuDNN declined is not built either: it reads the forward's O and
softmax stats, which no cuDNN graph wrote; its peers run on the forward's tensors and their own dO.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..model.config import SdpaConfig
from ..model.results import OutputCheck, PassResult
from ..model.statuses import STATUS_UNSUPPORTED
from .measure import Bench, Measurement, counts
from .passes import BuiltPass, Pass

NOTE = "cuDNN did not run this pass: the fp32 reference and the peers ran on its tensors without it"
DROPOUT_NOTE = (
    "dropout on: its mask is drawn by cuDNN's graph, which did not run, so no peer can be checked without it"
)


def not_built(spec: Pass, config: SdpaConfig, status: str, words: str) -> PassResult:
    """A pass whose graph is not built: a known refusal's words, or a forward cuDNN declined."""
    return PassResult(status=status, message=words, **counts(spec, config))


def after_declined_forward(spec: Pass, config: SdpaConfig) -> PassResult:
    """The backward of a forward cuDNN declined: not built, since no graph wrote what it reads."""
    words = "not built: it reads the O and softmax stats of cuDNN's forward, which cuDNN declined"
    return not_built(spec, config, STATUS_UNSUPPORTED, words)


def declined_pass(
    spec: Pass,
    config: SdpaConfig,
    refusal: PassResult,
    before: dict[str, BuiltPass],
    options: Any,
    bench: Bench,
) -> tuple[PassResult, BuiltPass | None]:
    """The refusal with what ran without cuDNN: the checks of the peers against the reference
    (where checking), the peers asked for, timed; and the tensors made (None where nothing ran:
    nothing asked, or dropout, whose mask only cuDNN's graph draws)."""
    if not (options.check or options.peers):
        return refusal, None
    if config.dropout:
        return dataclasses.replace(refusal, notes=(*refusal.notes, DROPOUT_NOTE)), None
    bench.progress(f"the {spec.kind} without cuDNN: its tensors, the reference and the peers")
    data = spec.tensors(config, options.seed, before, bench.device)
    built = BuiltPass(spec.kind, None, data, None, config=config)
    m = Measurement(spec, built, before, bench)
    if options.check:
        bench.progress(f"checking the {spec.kind}'s peers")
        m.prepare_check()
    field_peers: tuple = ()
    errors: dict[str, dict[str, Any]] = {}
    if options.peers:
        from .peer_runs import measure_peers

        field_peers, errors = measure_peers(
            m, options.peers, options, spec.flops(config), spec.io_bytes(config)
        )
    checks = _checks(built, errors)
    result = dataclasses.replace(
        refusal,
        reference=spec.reference_name if checks else "",
        check_device=bench.device if checks else "",
        checks=checks,
        peers={**built.peers, **{p.name: p.description for p in field_peers if p.ran}},
        field_peers=field_peers,
        notes=(*refusal.notes, NOTE, *spec.notes(config), *built.peer_notes),
    )
    return result, built


def _checks(built: BuiltPass, errors: dict[str, dict[str, Any]]) -> tuple[OutputCheck, ...]:
    """Each output some peer wrote, against the reference: no error of cuDNN's (it did not run)."""
    if built.reference is None:
        return ()
    found = []
    for name in built.reference:
        peers = {**built.peer_metrics.get(name, {}), **errors.get(name, {})}
        if peers:
            found.append(OutputCheck(name, *built.tolerances[name], None, peers))
    return tuple(found)
