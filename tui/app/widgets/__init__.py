"""The dashboard's panes, one widget a file, re-exported here."""

from .accuracy import AccuracyPane
from .config_form import ConfigForm
from .environment import EnvironmentPane
from .explain import ExplainPane
from .graph_json import GraphPane
from .latency import LatencyPane
from .mask import MaskPane
from .peers import PeersPane
from .phases import PhasesPane
from .plans import PlansPane
from .status import StatusLine
from .summary import SummaryPane
from .sweep import SweepPane

__all__ = [
    "AccuracyPane",
    "ConfigForm",
    "EnvironmentPane",
    "ExplainPane",
    "GraphPane",
    "LatencyPane",
    "MaskPane",
    "PeersPane",
    "PhasesPane",
    "PlansPane",
    "StatusLine",
    "SummaryPane",
    "SweepPane",
]
