"""Input recipes: what a run is given as data, beyond the shape: the inputs' seed, their
magnitudes, the fill of the parts no output may read, and strides other than the plain layouts.

A recipe is one field's text (`inputs` of SdpaConfig), items joined by commas:

  normal           N(0, 1) inputs from the run's seed, padded parts as drawn (the default)
  seed:N           the inputs' seed, kept with the configuration (instead of the run's --seed)
  scale:X          q drawn X times larger: every score X times larger (sharp rows, a large LSE)
  shift:X          every score moved by about X: q and k share a component along the first
                   head-dim axis whose product is X (X = -1000: a very negative LSE)
  near-equal       each head's keys one drawn vector plus 1/64 of their own draw: near-equal
                   scores, an almost flat softmax
  pad:nan|zero     the parts of every tensor past each sequence's real length (a padding mask),
                   the page pool's unused pages and the tail of each last page (a paged cache), the
                   packed buffer past its real tokens (THD) and the gaps of padded strides, filled
                   with NaN (or zeros): an output that reads them shows it
  strides:padded   q, k, v, o and the gradients as views into wider rows: each head-dim row
                   followed by a gap of STRIDE_GAP elements (as slices of a fused projection)

The engine applies a recipe to the drawn tensors (engine/recipes.py), the reference reads the
same values, and the reproduction script writes the same steps; the default changes nothing.
This module is the recipe's text and arithmetic without torch.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import SdpaConfig

NORMAL = "normal"
FORMS = (
    "normal, or items joined by commas: seed:N, scale:X, shift:X, near-equal, pad:nan|zero, strides:padded"
)
ITEMS = ("seed", "scale", "shift", "near-equal", "pad", "strides")  # the canonical order
FILLS = ("nan", "zero")
STRIDE_FORMS = ("padded",)
STRIDE_GAP = 16  # elements after each head-dim row: 32 B of fp16, keeping rows 16-byte aligned
NEAR_EQUAL_SPREAD = 1 / 64  # each key's own share beside the head's one vector
MAX_SCALE = 1000.0  # N(0, 1) * 1000 stays finite in fp16 (65504) out to 65 sigma
MAX_SHIFT = 1e4  # fp32 scores of 1e4 still resolve 1e-3: the fp32 reference stays exact enough
SEED_MAX = (1 << 63) - 1  # as config.SEED_MAX: torch's generators take an int64


@dataclass(frozen=True)
class Recipe:
    """One input recipe: each item's value, or its default where the text leaves it out."""

    seed: int | None = None  # None: the run's seed (RunOptions.seed)
    scale: float = 1.0
    shift: float = 0.0
    near_equal: bool = False
    pad: str | None = None  # one of FILLS; None: the padded parts hold what was drawn
    strides: str | None = None  # one of STRIDE_FORMS; None: the layout's own strides

    @property
    def text(self) -> str:
        """The canonical text, as the field keeps it."""
        items = [
            f"seed:{self.seed}" if self.seed is not None else "",
            f"scale:{_number(self.scale)}" if self.scale != 1.0 else "",
            f"shift:{_number(self.shift)}" if self.shift else "",
            "near-equal" if self.near_equal else "",
            f"pad:{self.pad}" if self.pad else "",
            f"strides:{self.strides}" if self.strides else "",
        ]
        return ",".join(i for i in items if i) or NORMAL

    @property
    def magnitudes(self) -> bool:
        """Whether the drawn values are changed (scale, shift, near-equal)."""
        return self.scale != 1.0 or bool(self.shift) or self.near_equal

    @property
    def gap(self) -> int:
        """Elements after each head-dim row (0: the layout's own strides)."""
        return STRIDE_GAP if self.strides == "padded" else 0

    def seed_for(self, run_seed: int) -> int:
        """The seed the inputs are drawn from: the recipe's own, else the run's."""
        return run_seed if self.seed is None else self.seed

    def words(self) -> str:
        """What it does to the inputs, in a few words ('' for the default)."""
        parts = []
        if self.seed is not None:
            parts.append(f"drawn from seed {self.seed}")
        if self.scale != 1.0:
            parts.append(f"q {_number(self.scale)} times larger (scores alike)")
        if self.shift:
            parts.append(f"every score moved by about {_number(self.shift)}")
        if self.near_equal:
            parts.append("near-equal keys in each head")
        if self.pad:
            parts.append(f"padded and unused parts filled with {'NaN' if self.pad == 'nan' else 'zeros'}")
        if self.strides:
            parts.append(f"each head-dim row followed by a gap of {self.gap} elements")
        return ", ".join(parts)


DEFAULT = Recipe()


def _number(value: float) -> str:
    """The shortest text that reads back the same: 100, not 100.0."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _float(text: str, what: str, low: float, high: float, above: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{what} must be a number (got {text!r})") from None
    inside = (low < value if above else low <= value) and value <= high
    if not (math.isfinite(value) and inside):
        bound = f"above {_number(low)}" if above else f"at least {_number(low)}"
        raise ValueError(f"{what} must be {bound} and at most {_number(high)} (got {text!r})")
    return value


def _item(recipe: dict, name: str, arg: str, text: str) -> None:
    """One item of the text into `recipe` (the Recipe's keywords); ValueError where it is wrong."""
    needs = {"seed": "seed:N", "scale": "scale:X", "shift": "shift:X", "pad": "pad:nan or pad:zero",
             "strides": "strides:padded", "near-equal": "near-equal"}  # fmt: skip
    if (name == "near-equal") != (arg == ""):
        raise ValueError(f"{name} is written {needs[name]} (got {text!r})")
    if name == "seed":
        if not arg.isdigit() or int(arg) > SEED_MAX:
            raise ValueError(f"an input seed is a whole number from 0 to 2**63-1 (got {arg!r})")
        recipe["seed"] = int(arg)
    elif name == "scale":
        recipe["scale"] = _float(arg, "an input scale", 0.0, MAX_SCALE, above=True)
    elif name == "shift":
        recipe["shift"] = _float(arg, "a score shift", -MAX_SHIFT, MAX_SHIFT)
    elif name == "near-equal":
        recipe["near_equal"] = True
    elif name == "pad":
        if arg not in FILLS:
            raise ValueError(f"a fill is pad:nan or pad:zero (got {text!r})")
        recipe["pad"] = arg
    elif arg not in STRIDE_FORMS:
        raise ValueError(f"strides are written strides:padded (got {text!r})")
    else:
        recipe["strides"] = arg


@lru_cache(maxsize=256)
def parse_inputs(text: str) -> Recipe:
    """What a person typed -> the Recipe; ValueError says, in one line, what to write instead."""
    if not isinstance(text, str):
        raise ValueError(f"an input recipe is text such as pad:nan,scale:100 (got {text!r})")
    items = [i for i in "".join(text.split()).lower().replace("_", "-").split(",") if i]
    recipe: dict = {}
    seen: set[str] = set()
    for item in items:
        name, _, arg = item.partition(":")
        if name == NORMAL and not arg:
            continue
        if name not in ITEMS:
            raise ValueError(f"unknown input item {name!r} (use {FORMS})")
        if name in seen:
            raise ValueError(f"{name} is given twice (got {text.strip()!r})")
        seen.add(name)
        _item(recipe, name, arg, item)
    if items.count(NORMAL) and seen:
        raise ValueError(f"normal is the recipe without items: write the items alone (got {text.strip()!r})")
    return Recipe(**recipe)


def canonical_inputs(text: str) -> str:
    """The canonical text of what was typed; ValueError as parse_inputs."""
    return parse_inputs(text).text


def recipe_of(config: SdpaConfig) -> Recipe:
    """The configuration's recipe; the default where its text is not one (validation says why)."""
    try:
        return parse_inputs(config.inputs)
    except ValueError:
        return DEFAULT


def problems(config: SdpaConfig) -> list[str]:
    """Why the recipe cannot go with the rest of the configuration (each a sentence)."""
    r = recipe_of(config)
    out = []
    if r.strides and config.packed:
        out.append(
            "strides:padded needs a dense layout (BSHD, BHSD, SBHD): packed THD tokens have no rows to pad"
        )
    if r.strides and config.fp8:
        out.append("strides:padded takes fp16 or bf16 inputs: the FP8 path quantises into tensors of its own")
    return out


def has_unused(config: SdpaConfig) -> bool:
    """Whether a fill has somewhere to go: padded parts, unused pages, a packed tail or stride gaps."""
    return config.varlen or config.paged or config.packed or recipe_of(config).gap > 0


def spare_pages(config: SdpaConfig) -> int:
    """With a fill, the pool's unused pages: one for each page-table entry past a sequence's last
    page (which then points at it); 0 without a fill or a paged cache."""
    if not config.paged or recipe_of(config).pad is None:
        return 0
    return config.b * config.pages_per_sequence() - sum(config.pages_needed())


def hazard_recipes(rng: random.Random, config: SdpaConfig) -> list[str]:
    """Recipes worth drawing for `config`, each a text the field takes: NaN in its padded and
    unused parts where it has any, large and shifted scores (a very large or very negative LSE),
    near-equal scores, padded strides where the layout and dtype allow; a drawn seed with each."""
    seed = f"seed:{rng.randrange(1 << 31)}"
    out = [f"{seed},scale:{rng.choice((30, 100, 300))}", f"{seed},shift:{rng.choice((-3000, -1000, 1000))}",
           f"{seed},near-equal"]  # fmt: skip
    padding = config.varlen or config.paged or config.packed  # somewhere for the fill besides stride gaps
    if padding:
        out += [f"{seed},pad:nan", f"{seed},pad:nan,shift:-1000"]
    if not config.packed and not config.fp8:
        out.append(f"{seed},pad:nan,strides:padded")
    return [canonical_inputs(t) for t in out]
