"""The reproduction script's input recipe (model/inputs.py), written out for one configuration:
the magnitudes it gives q and k, and the fill of every part no output may read, in the engine's
steps (engine/recipes.py and storage.py), so the script's tensors are the engine's to the bit.
Nothing is written for the default recipe."""

from __future__ import annotations

from ..engine.recipes import shift_component
from ..model.config import SdpaConfig
from ..model.inputs import NEAR_EQUAL_SPREAD, recipe_of
from ..model.tensor_plan import is_packed


def filled(c: SdpaConfig) -> bool:
    """Whether the script fills the padded parts (a fill, and padding for it to go to)."""
    return recipe_of(c).pad is not None and c.padded


def recipe_constants(c: SdpaConfig) -> list[str]:
    r = recipe_of(c)
    if not (r.pad or r.gap):
        return []
    what = "every part no output may read" if r.pad else "the gaps of the padded strides"
    value = 'float("nan")' if r.pad == "nan" else "0.0"
    lines = [f"FILL = {value}  # the input recipe's fill of {what}"]
    if r.gap:
        lines.append(f"GAP = {r.gap}  # elements after each head-dim row (strides:padded)")
    return lines


def recipe_helpers(c: SdpaConfig) -> list[str]:
    """shaped() where the recipe sets magnitudes; fill() and fill_unused() where it fills."""
    r = recipe_of(c)
    lines: list[str] = []
    if r.magnitudes:
        lines += [
            "def shaped(q, k):",
            f'    """The input recipe {r.text}: computed in fp32 from the stored numbers, stored again."""',
            "    qf, kf = q.float(), k.float()",
        ]
        if r.near_equal:
            lines.append(
                f"    kf = kf[:, :, :1] + kf * {NEAR_EQUAL_SPREAD!r}  # each head's keys near its first"
            )
        if r.scale != 1.0:
            lines.append(f"    qf = qf * {r.scale!r}  # every score {r.scale:g} times larger")
        if r.shift:
            m = shift_component(c, r)
            lines += [
                f"    qf, kf = qf.clone(), kf.clone()  # a shared component: every score moves by {r.shift:g}",
                f"    qf[..., 0] += {(m if r.shift > 0 else -m)!r}",
                f"    kf[..., 0] += {m!r}",
            ]
        lines += ["    q.copy_(qf), k.copy_(kf)", ""]
    if filled(c):
        lines += _fill_helpers(c)
    return lines


def _fill_helpers(c: SdpaConfig) -> list[str]:
    byte = "0x7F" if recipe_of(c).pad == "nan" else "0"
    lines = [
        "def fill(t):",
        '    """t set to FILL' + (" (E4M3's are bytes of their own)" if c.fp8 else "") + '."""',
        f"    return t.view(torch.uint8).fill_({byte}) if t.element_size() == 1 else t.fill_(FILL)"
        if c.fp8
        else "    return t.fill_(FILL)",
        "",
    ]
    if not (_unused(c, FORWARD_NAMES) or _unused(c, BACKWARD_NAMES)):
        return lines  # packed tokens hold their fill past the real ones (packed())
    lines += [
        "def fill_unused(data, names):",
        '    """FILL past each sequence\'s real length: dense rows'
        + (", a pool's slots (its last page's tail, the spare pages)" if c.paged else "")
        + (", the bias outside the real block" if c.bias != "none" else "")
        + '."""',
        "    for name in names:",
    ]
    if c.bias != "none":
        rows = "LENS_Q[i], LENS_KV[i]" if c.bias.startswith("b") else "max(LENS_Q), max(LENS_KV)"
        lines += [
            '        if name == "bias":',
            '            for i, bias in enumerate(data["bias"]):',
            f"                rows, keys = {rows}",
            "                fill(bias[:, rows:]), fill(bias[:, :rows, keys:])",
            "            continue",
        ]
    lines.append('        lens = LENS_KV if name in ("k", "v") else LENS_Q')
    if c.paged:
        raw = (
            "data[name].view(torch.uint8) if data[name].element_size() == 1 else data[name]"
            if c.fp8
            else "data[name]"
        )
        value = f"({byte} if raw is not data[name] else FILL)" if c.fp8 else "FILL"
        lines += [
            '        if name in ("k", "v"):  # through the table: every slot its row reaches past the real length',
            f"            raw = {raw}",
            "            for i, n in enumerate(lens):",
            "                j = torch.arange(n, PER_SEQ * PAGE, device=DEVICE)",
            f'                raw[data["paged_attention_k_table"].view(B, -1)[i, j // PAGE].long(), :, j % PAGE] = {value}',
            "            continue",
        ]
    lines += ["        for i, n in enumerate(lens):", "            fill(data[name][i, :, n:])", ""]
    return lines


FORWARD_NAMES, BACKWARD_NAMES = ("q", "k", "v", "bias"), ("dO",)


def _unused(c: SdpaConfig, names: tuple[str, ...]) -> tuple[str, ...]:
    """Those of `names` fill_unused() fills: packed tensors hold their fill already, the bias where there is one."""
    return tuple(n for n in names if not is_packed(c, n) and (n != "bias" or c.bias != "none"))


def shaping(c: SdpaConfig) -> list[str]:
    """forward_tensors()'s line after drawing q, k and v."""
    return ['    shaped(data["q"], data["k"])'] if recipe_of(c).magnitudes else []


def unfilled_logical(c: SdpaConfig) -> str:
    """How forward_tensors() keeps the logical tensors the reference reads apart from the fill."""
    if filled(c):
        return "    logical = {name: t.clone() for name, t in data.items()}  # the reference's: the fill is data's"
    return "    logical = dict(data)"


def filling(c: SdpaConfig, names: tuple[str, ...]) -> list[str]:
    """The line that fills `names`' unused parts, where the recipe fills and the config pads."""
    unused = _unused(c, names) if filled(c) else ()
    names_text = "(" + ", ".join(f'"{n}"' for n in unused) + ("," if len(unused) == 1 else "") + ")"
    return [f"    fill_unused(data, {names_text})"] if unused else []
