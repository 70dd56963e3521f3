"""The words a result is written in: its schema version, the timing regimes, what a status can
be, and the kinds of pass. Apart from results.py so that the reader of older files
(results_v1.py) needs only these."""

SCHEMA_VERSION = "2.7"  # 2.7: the fp64 cross-check of each output; 2.6: equivalent forms timed; 2.5: a pinned plan; 2.4: where a plan comes from; 2.3: peers timed beside cuDNN; 2.2: a crash as a finding, known issues; 2.1: timing regime, samples,
# stability, GPU telemetry, the peer's backend
# 2.0: a run is a list of passes; 1.1 (fp8, backward) and 1.0 files still read

# The timing regimes: a short run on a rested GPU (published tables), or under continuing load.
REGIME_BURST = "burst"
REGIME_SUSTAINED = "sustained"
REGIMES = (REGIME_BURST, REGIME_SUSTAINED)

# What `status` of a RunResult or a PassResult can be.
STATUS_OK = "ok"  # built, ran, and (if checked) matched the reference
STATUS_MISMATCH = "mismatch"  # ran, but an output is outside tolerance
STATUS_INVALID = "invalid"  # the configuration does not make sense (see errors)
STATUS_UNSUPPORTED = "unsupported"  # cuDNN refused it, in its own words (see message)
STATUS_ERROR = "error"  # something failed that should not have (see message)
STATUS_CPU_ONLY = "cpu_only"  # no usable GPU: what could be done on the CPU was done
STATUS_CRASH = "crash"  # it crashed the GPU's context or the engine process (see crash)
STATUS_KNOWN_ISSUE = "known_issue"  # matches a known issue (see known_issues): not run, or a refusal: no cuDNN graph built, its peers run
STATUS_CANCELLED = "cancelled"  # stopped at a step boundary: asked to, or a newer request came
GOOD_STATUSES = (STATUS_OK, STATUS_CPU_ONLY)

# The kinds of pass a run can hold, in the order they run.
FORWARD = "forward"
BACKWARD = "backward"
PASS_KINDS = (FORWARD, BACKWARD)
