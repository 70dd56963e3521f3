"""What this machine offers for cuDNN attention, and, when it offers nothing, why.

Imports torch and cudnn lazily: a machine without them must still be able to say so.
"""

from __future__ import annotations

import importlib.util
import platform
import socket
import subprocess
import sys
from pathlib import Path

from ..model.results import Environment
from .telemetry import identity, nvml_status

MIN_COMPUTE_CAPABILITY = (8, 0)


def _format_cudnn_version(v: int | None) -> str:
    """cuDNN 9 encodes 9.19.0 as 91900."""
    if not v:
        return ""
    v = int(v)
    if v >= 90000:
        return f"{v // 10000}.{(v // 100) % 100}.{v % 100}"
    return f"{v // 1000}.{(v // 100) % 10}.{v % 100}"


def _driver_version() -> str:
    """The NVIDIA driver's own version (580.x), which torch does not report."""
    proc = Path("/proc/driver/nvidia/version")
    try:
        text = proc.read_text()
        for word in text.split():
            if word.count(".") >= 1 and word.replace(".", "").isdigit():
                return word
    except OSError:
        pass
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return ""


def python_engines_status() -> str:
    """The frontend's open-source engines (sdpa_fwd_prefill_sm90 ...) need nvidia-cutlass-dsl;
    without it they never appear in the plan list, so plan lists differ between machines."""
    if importlib.util.find_spec("cutlass") is not None:
        return "available (nvidia-cutlass-dsl installed)"
    return "absent (nvidia-cutlass-dsl not installed: open-source engines are not offered)"


def collect() -> Environment:
    """Describe the machine; never raises."""
    info: dict = {
        "python_version": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "telemetry": nvml_status(),  # clocks, power and throttle reasons, or why they cannot be read
        "host": socket.gethostname(),
    }
    reason = ""
    try:
        import torch
    except Exception as exc:  # pragma: no cover - torch is a dependency
        return Environment(gpu_available=False, unavailable_reason=f"torch cannot be imported: {exc}", **info)
    # a plain str: torch.__version__ is a TorchVersion, whose unpickling imports torch in the UI
    info["torch_version"] = str(torch.__version__)
    info["cuda_runtime"] = torch.version.cuda or ""
    try:
        info["torch_cudnn_version"] = _format_cudnn_version(torch.backends.cudnn.version())
    except Exception:
        info["torch_cudnn_version"] = ""
    try:
        import cudnn

        info["frontend_version"] = getattr(cudnn, "__version__", "")
        info["python_engines"] = python_engines_status()
        try:
            info["cudnn_backend_version"] = _format_cudnn_version(cudnn.backend_version())
        except Exception as exc:
            reason = f"the cuDNN library could not be loaded ({exc})"
    except Exception as exc:
        reason = f"the cuDNN frontend (package nvidia-cudnn-frontend) cannot be imported: {exc}"

    if not torch.cuda.is_available():
        why = "no CUDA device is visible to torch"
        if not torch.version.cuda:
            why = "this torch build has no CUDA support"
        return Environment(gpu_available=False, unavailable_reason=reason or why, **info)

    props = torch.cuda.get_device_properties(0)
    info.update(
        gpu_name=props.name,
        compute_capability=f"{props.major}.{props.minor}",
        sm_count=props.multi_processor_count,
        gpu_memory_bytes=props.total_memory,
        l2_bytes=getattr(props, "L2_cache_size", None),
        driver_version=_driver_version(),
        **{"gpu_uuid": str(getattr(props, "uuid", "") or ""), **identity(props)},  # NVML's words win
    )
    if (props.major, props.minor) < MIN_COMPUTE_CAPABILITY:
        reason = (
            f"{props.name} has compute capability {props.major}.{props.minor}; cuDNN's fused attention "
            f"needs {MIN_COMPUTE_CAPABILITY[0]}.{MIN_COMPUTE_CAPABILITY[1]} (Ampere) or newer"
        )
    return Environment(gpu_available=not reason, unavailable_reason=reason, **info)


def describe(env: Environment) -> list[tuple[str, str]]:
    """Rows for a two-column table; shared by the CLI and the dashboard."""
    mem = f"{env.gpu_memory_bytes / 2**30:.1f} GiB" if env.gpu_memory_bytes else ""
    l2 = f"{env.l2_bytes / 2**20:.0f} MiB" if env.l2_bytes else ""
    rows = [
        ("GPU", env.gpu_name or "none"),
        ("compute capability", env.compute_capability),
        ("SMs", str(env.sm_count or "")),
        ("memory", mem),
        ("L2", l2),
        ("driver", env.driver_version),
        ("CUDA (torch build)", env.cuda_runtime),
        ("torch", env.torch_version),
        ("cuDNN (frontend loaded)", env.cudnn_backend_version),
        ("cuDNN (torch reports)", env.torch_cudnn_version),
        ("cuDNN frontend", env.frontend_version),
        ("open-source engines", env.python_engines),
        ("clocks and power", env.telemetry or "not recorded"),
        (
            "python",
            f"{env.python_version} ({env.platform})" if env.python_version else sys.version.split()[0],
        ),
    ]
    if env.gpu_uuid or env.gpu_index is not None:
        which = [f"index {env.gpu_index}" if env.gpu_index is not None else "", env.gpu_uuid,
                 f"serial {env.gpu_serial}" if env.gpu_serial else ""]  # fmt: skip
        rows.insert(
            1, ("which GPU", ", ".join(w for w in which if w) + (f" on {env.host}" if env.host else ""))
        )
    if not env.gpu_available:
        rows.insert(0, ("GPU unavailable", env.unavailable_reason))
    return rows
